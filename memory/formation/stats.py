"""What formation has made: memories per mode and summarizer, the storage they saved, the facts they
carry, why summaries fell back to extractive, and what still waits (messages not yet remembered,
memories not yet indexed).

Sizes are characters on both sides, as Postgres `length()` counts them: `source_chars` is the
verbatim exchange's length, the stored size the length of the memory's text (summary and carried
facts). The verbatim text a memory keeps beside it (hybrid mode, by definition; a pinned or corrected
memory, what was said) is counted on its own, not as a loss of the summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import func, select

from memory.formation.forming import pending_message_count
from memory.formation.summarizer import FallbackReason
from memory.recall.store import MemoryStore
from memory.types import MemoryState
from models import Memory

# A reason in a few words; a configuration error's own words (naming the setting) replace it when known.
FALLBACK_LABELS = {
    FallbackReason.NO_MODEL: "no summarizer model (set SUMMARIZER_MODEL)",
    FallbackReason.CONFIG: "configuration error (check the SUMMARIZER_* settings or the LLM config)",
    FallbackReason.UNREACHABLE: "model unreachable",
    FallbackReason.TIMEOUT: "model too slow for LLM_TIMEOUT",
    FallbackReason.REFUSED: "model refused",
    FallbackReason.INVENTED: "invented facts",
    FallbackReason.OTHER_USER: "another user's facts",
    FallbackReason.UNPARSEABLE: "unparseable answer",
    FallbackReason.OFF_EXCHANGE: "answer about another exchange",
    FallbackReason.CUT: "answer cut mid-sentence",
    FallbackReason.NOT_SMALLER: "summary not smaller: cleaned exchange stored",
    FallbackReason.MISATTRIBUTED: "a fact given to the wrong speaker",
}


@dataclass(frozen=True, slots=True)
class ModeStats:
    mode: str
    summarizer: str
    memories: int
    source_chars: int
    stored_chars: int
    verbatim_chars: int  # kept beside the memory's text (hybrid, pinned, corrected)
    fidelity_misses: int  # memories carrying facts their summary dropped

    @property
    def saving_percent(self) -> float:
        return _saving(self.source_chars, self.stored_chars)

    @property
    def kept_chars(self) -> int:
        """Every text kept: the memory's own, and the original beside it (hybrid's cost)."""
        return self.stored_chars + self.verbatim_chars

    @property
    def kept_change_percent(self) -> float:
        """What is kept against the exchanges as said: negative saves, positive costs (hybrid)."""
        return -_saving(self.source_chars, self.kept_chars)


@dataclass(frozen=True, slots=True)
class MemoryStats:
    rows: list[ModeStats]
    pending_messages: int
    unindexed_memories: int
    set_aside_memories: int = 0  # could not be indexed (memory.recall.store.set_aside)
    fallbacks: dict[str, int] = field(default_factory=dict)  # extractive summaries by reason
    # Summarizer models this process now asks one exchange a call (memory.formation.pace).
    one_exchange_a_call: list[str] = field(default_factory=list)

    @property
    def memories(self) -> int:
        return sum(r.memories for r in self.rows)

    @property
    def source_chars(self) -> int:
        return sum(r.source_chars for r in self.rows)

    @property
    def stored_chars(self) -> int:
        return sum(r.stored_chars for r in self.rows)

    @property
    def verbatim_chars(self) -> int:
        return sum(r.verbatim_chars for r in self.rows)

    @property
    def saving_percent(self) -> float:
        return _saving(self.source_chars, self.stored_chars)

    @property
    def kept_chars(self) -> int:
        return self.stored_chars + self.verbatim_chars

    @property
    def kept_change_percent(self) -> float:
        return -_saving(self.source_chars, self.kept_chars)

    def one_exchange_lines(self) -> list[str]:
        """A line per summarizer model asked one exchange a call, and why."""
        return [
            f"summarizer {model} is asked one exchange a call: its answers to numbered batches could not "
            "be parsed (more calls, the same memories)"
            for model in self.one_exchange_a_call
        ]

    def fallback_line(self) -> str | None:
        """The extractive summaries by reason in one line (None when the model made every summary)."""
        return fallback_line(self.fallbacks, self.memories)


def _saving(source: int, stored: int) -> float:
    return 100.0 * (1 - stored / source) if source else 0.0


def fallback_line(
    counts: Mapping[str, int], total: int, details: Mapping[str, str] | None = None
) -> str | None:
    """`summarizer failed for 11 of 12 exchanges: missing API key (set SUMMARIZER_API_KEY)`, or with
    several reasons their counts; None when no summary fell back.

    `details` (a failure's own words, by reason) replace the general labels where given.
    """
    counted = {reason: n for reason, n in counts.items() if n}
    if not counted:
        return None
    failed = sum(counted.values())
    if set(counted) == {FallbackReason.NO_MODEL.value}:
        label = FALLBACK_LABELS[FallbackReason.NO_MODEL]
        return f"summaries extractive for {failed} of {total} exchanges: {label}"

    def named(reason: str) -> str:
        if details and details.get(reason) and reason in (FallbackReason.CONFIG, FallbackReason.UNREACHABLE):
            return details[reason]
        return FALLBACK_LABELS.get(FallbackReason(reason), reason) if reason in _REASONS else reason

    ordered = sorted(counted, key=lambda reason: (-counted[reason], reason))
    if len(ordered) == 1:
        reasons = named(ordered[0])
    else:
        reasons = ", ".join(f"{counted[reason]} {named(reason)}" for reason in ordered)
    return f"summarizer failed for {failed} of {total} exchanges: {reasons}"


_REASONS = {reason.value for reason in FallbackReason}


async def memory_stats(
    store: MemoryStore, *, personality_id: int | None = None, user_id: str | None = None
) -> MemoryStats:
    """Live memories of a personality (or all), of one user (or all), grouped by mode and summarizer."""
    live = [Memory.state != MemoryState.DELETED.value]
    if personality_id is not None:
        live.append(Memory.personality_id == personality_id)
    if user_id is not None:
        live.append(Memory.user_id == user_id)
    query = (
        select(
            Memory.mode,
            Memory.summarizer,
            func.count(Memory.id),
            func.coalesce(func.sum(Memory.source_chars), 0),
            func.coalesce(func.sum(func.length(Memory.content)), 0),
            func.coalesce(func.sum(func.length(Memory.content_verbatim)), 0),
            func.count(Memory.id).filter(func.jsonb_array_length(Memory.fidelity_misses) > 0),
        )
        .where(*live)
        .group_by(Memory.mode, Memory.summarizer)
    )
    reasons = (
        select(Memory.summary_fallback, func.count(Memory.id))
        .where(*live, Memory.summary_fallback.is_not(None))
        .group_by(Memory.summary_fallback)
    )
    unindexed = select(func.count(Memory.id)).where(Memory.state == MemoryState.FORMED.value)
    aside = select(func.count(Memory.id)).where(Memory.state == MemoryState.SET_ASIDE.value)
    if personality_id is not None:
        unindexed = unindexed.where(Memory.personality_id == personality_id)
        aside = aside.where(Memory.personality_id == personality_id)
    async with store.sessionmaker() as session:
        rows = (await session.execute(query)).all()
        fallbacks = {str(reason): int(count) for reason, count in (await session.execute(reasons)).all()}
        unindexed_count = int(await session.scalar(unindexed) or 0)
        aside_count = int(await session.scalar(aside) or 0)
    return MemoryStats(
        rows=[ModeStats(r[0], r[1], r[2], int(r[3]), int(r[4]), int(r[5]), r[6]) for r in sorted(rows)],
        pending_messages=await pending_message_count(store, personality_id, user_id),
        unindexed_memories=unindexed_count,
        set_aside_memories=aside_count,
        fallbacks=fallbacks,
    )
