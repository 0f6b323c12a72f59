"""A batch's memories checked against what the user already said, before they are written.

Two checks, in order, each on what a memory claims (memory.formation.restatements):

1. A memory stating a claim its user forgot or corrected (memory.formation.forgotten) is written
   superseded (kept, never recalled), unless its user says the claim again after it was recorded:
   their newest word, remembered as any other, and the claim holds nothing back from then on
   (memory.formation.supersession).
2. A memory saying what one of the same user and personality already says (the same key facts both
   ways, nothing negated, its text's embedding at least REPEAT_CLOSENESS from the other's) is a
   repeat, and reinforces that memory instead of adding a row: the memory's `times_said` and
   `last_said_at` go up. Said in the same conversation, its messages join the memory's sources, so
   that "Forget this" on them, an export and the keyword index all still find them; said in another
   conversation of the same venue (the same guild, or the DM: `chat --new`, a new thread) the first
   memory is reinforced alone. Said in another venue (seen by other recalls: a guild against the DM)
   it is written, marked `repeat_of` the first, and reinforces it: recall shows one of the two.

The candidates are the few nearest memories in the index (one search per memory, off the chat
path) and the batch's own earlier memories.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from memory.formation.cleaning import strip_chat_template_tokens
from memory.formation.forgotten import StoredClaim, claims_of, mark_restated, memory_claims
from memory.formation.restatements import (
    Statement,
    claim_text,
    holds_facts,
    meaning_text,
    reply_text,
    says_again,
    shares_anchors,
    statement,
    unit_vector,
)
from memory.formation.shaping import Shaped
from memory.formation.supersession import Verdict
from memory.recall.store import MemoryStore
from memory.types import MemoryState, RecallFilter
from models import Conversation, Memory, Personality

# How close two memories' embeddings (their whole text, as the index holds them) must be for one to
# repeat the other, with the same key facts held both ways, nothing negated, and each holding the
# other's rarest word: "let me tell you about my garden" is not "... about the weather" (0.82), nor
# "I made pesto with the basil" "I grow tomatoes and basil". On bench/data/repeats.json's phrasings:
# 77% of the pairs saying one fact are repeats, 1 pair in 5,960 saying two is.
REPEAT_CLOSENESS = 0.75
REPEAT_CANDIDATES = 3
# messages.memory_excluded of an exchange its user forgot ("Forget this"), or that restates a claim
# they forgot.
FORGOTTEN = "forgotten"


@dataclass
class Reinforcement:
    """A stored memory said again: how many more times, when last, and the messages that said it."""

    times: int = 0
    last_said_at: datetime | None = None
    sources: list[str] = field(default_factory=list)

    def add(self, said_at: datetime, sources: Sequence[str]) -> None:
        self.times += 1
        self.last_said_at = said_at if self.last_said_at is None else max(self.last_said_at, said_at)
        self.sources.extend(s for s in sources if s not in self.sources)


@dataclass
class Screened:
    """A batch after the checks: the rows to write (with their vectors and shaped exchanges), the
    stored memories said again, the exchanges written superseded (`restating`: not remembered for
    their user) and the claims the user said again."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    vectors: list[list[float]] = field(default_factory=list)
    formed: list[Shaped] = field(default_factory=list)
    reinforced: dict[uuid.UUID, Reinforcement] = field(default_factory=dict)
    restating: list[Shaped] = field(default_factory=list)
    restated: set[int] = field(default_factory=set)
    repeats: int = 0  # exchanges that reinforced a memory rather than adding one

    async def apply(self, session: AsyncSession, conversation_id: int) -> None:
        """Reinforce the memories said again and mark the claims the user said again, in the
        session's transaction (the one writing the rows)."""
        if self.reinforced:
            # Core, not the ORM: an ORM UPDATE with a list of parameters is a bulk update by key.
            connection = await session.connection()
            await connection.execute(
                update(Memory)
                .where(Memory.id == bindparam("memory_id"), Memory.state != MemoryState.DELETED.value)
                .values(
                    times_said=Memory.times_said + bindparam("times"),
                    last_said_at=func.greatest(
                        func.coalesce(Memory.last_said_at, Memory.occurred_at), bindparam("said_at")
                    ),
                    source_message_ids=func.array_cat(
                        Memory.source_message_ids,
                        bindparam("sources", type_=ARRAY(Memory.source_message_ids.type.item_type)),
                    ),
                ),
                [
                    {"memory_id": i, "times": r.times, "said_at": r.last_said_at, "sources": r.sources}
                    for i, r in self.reinforced.items()
                ],
            )
        await mark_restated(session, self.restated)


async def screen_batch(
    store: MemoryStore,
    conversation: Conversation,
    formed: Sequence[Shaped],
    rows: Sequence[dict[str, Any]],
    vectors: Sequence[list[float]],
) -> Screened:
    """The batch checked (see the module docstring), in order: a memory may repeat an earlier one."""
    screened = Screened()
    if not rows:
        return screened
    for row in rows:
        row["forgotten_claim_id"], row["superseded_at"] = None, None
    async with store.sessionmaker() as session:
        name = await session.scalar(
            select(Personality.display_name).where(Personality.id == conversation.personality_id)
        )
        # What the user said in each exchange, not its summary: two vague summaries ("Alice told
        # Sage about her plans") of different exchanges are no repeat.
        texts = [
            "\n".join(m.content for m in f.exchange.user_messages) or claim_text(row["content"], name or "")
            for row, f in zip(rows, formed, strict=True)
        ]
        said = [statement(t, None, speakers=_speakers(f, name)) for t, f in zip(texts, formed, strict=True)]
        claims = await claims_of(session, conversation.personality_id, {f.exchange.user_id for f in formed})
        superseded, screened.restated = await _claims_stated(
            store, formed, rows, texts, said, claims, name or ""
        )
        now = datetime.now(UTC)
        for i, claim_id in superseded.items():
            rows[i]["forgotten_claim_id"], rows[i]["superseded_at"] = claim_id, now
        kept = [i for i in range(len(rows)) if i not in superseded]
        nearest = await _nearest(store, conversation.personality_id, rows, vectors, kept)
        stored = {
            c.memory_id: (c, statement(c.text, None, speakers=c.speakers))
            for c in await memory_claims(
                session,
                Memory.id.in_(sorted({hit for hits in nearest.values() for hit, _ in hits})),
                Memory.personality_id == conversation.personality_id,
                Memory.forgotten_claim_id.is_(None),
            )
        }
    screened.restating = [formed[i] for i in sorted(superseded)]
    written: list[int] = sorted(superseded)  # the rows to write (superseded ones repeat nothing)
    for i in kept:
        row = rows[i]
        # (same conversation, closeness, the memory or an earlier row of the batch) of each it repeats
        place = (row["guild_id"], row["is_dm"])
        repeated: list[tuple[bool, float, uuid.UUID | int]] = [
            (c.conversation_id == row["conversation_id"], score, hit)
            for hit, score in nearest[i]
            if hit in stored
            and (c := stored[hit][0]).user_id == row["user_id"]
            and _repeats(said[i], stored[hit][1], score)
        ]
        for j in written:
            score = float(unit_vector(vectors[i]) @ unit_vector(vectors[j]))
            if rows[j]["user_id"] == row["user_id"] and _repeats(said[i], said[j], score):
                repeated.append((True, score, j))
        if not repeated:
            written.append(i)
            continue
        same_conversation, _, target = max(repeated, key=lambda r: (r[0], r[1]))
        if isinstance(target, int):  # an earlier memory of this batch (this conversation)
            earlier = rows[target]
            earlier["times_said"] += 1
            earlier["last_said_at"] = max(
                earlier["last_said_at"] or earlier["occurred_at"], row["occurred_at"]
            )
            earlier["source_message_ids"] = [*earlier["source_message_ids"], *row["source_message_ids"]]
            screened.repeats += 1
        elif same_conversation:
            screened.reinforced.setdefault(target, Reinforcement()).add(
                row["occurred_at"], row["source_message_ids"]
            )
            screened.repeats += 1
        elif stored[target][0].venue == place:
            # Its messages are of another conversation: the memory's sources are of its own.
            root = stored[target][0].repeat_of or target
            screened.reinforced.setdefault(root, Reinforcement()).add(row["occurred_at"], ())
            screened.repeats += 1
        else:
            root = stored[target][0].repeat_of or target
            screened.reinforced.setdefault(root, Reinforcement()).add(row["occurred_at"], ())
            row["repeat_of"] = root
            written.append(i)
    written.sort()
    screened.rows = [rows[i] for i in written]
    screened.vectors = [vectors[i] for i in written]
    screened.formed = [formed[i] for i in written]
    return screened


def _repeats(later: Statement, earlier: Statement, cosine: float) -> bool:
    """Whether `later` repeats `earlier` (see REPEAT_CLOSENESS)."""
    return (
        says_again(later, earlier, cosine=cosine, at_least=REPEAT_CLOSENESS)
        and holds_facts(earlier, later.facts)
        and shares_anchors(later, earlier)
    )


def _speakers(shaped: Shaped, personality_name: str | None) -> list[str]:
    """Who spoke in the exchange: their names are no facts of what it says."""
    names = {m.author_name for m in shaped.exchange.messages if m.author_name}
    return sorted(names | ({personality_name} if personality_name else set()))


async def _claims_stated(
    store: MemoryStore,
    formed: Sequence[Shaped],
    rows: Sequence[dict[str, Any]],
    texts: Sequence[str],
    said: Sequence[Statement],
    claims: dict[str, list[StoredClaim]],
    personality_name: str,
) -> tuple[dict[int, int], set[int]]:
    """The memories of the batch that state a claim their user forgot or corrected, with the claim,
    and the claims their user said again (memory.formation.supersession)."""
    asked = [i for i, f in enumerate(formed) if claims.get(f.exchange.user_id)]
    if not asked:
        return {}, set()
    # Only for users with recorded claims: each side of the text, with its own meaning.
    speakers = {i: _speakers(formed[i], personality_name) for i in asked}
    replies = {
        i: r
        for i in asked
        if (r := strip_chat_template_tokens(reply_text(rows[i]["content"], personality_name)))
    }
    vectors = await store.embedder.embed(
        [meaning_text(strip_chat_template_tokens(texts[i]), speakers[i]) for i in asked]
        + [meaning_text(r, speakers[i]) for i, r in replies.items()]
    )
    reply_said = {
        i: statement(text, vector)
        for (i, text), vector in zip(replies.items(), vectors[len(asked) :], strict=True)
    }
    superseded: dict[int, int] = {}
    restated: set[int] = set()
    for i, vector in zip(asked, vectors[: len(asked)], strict=True):
        with_meaning = dataclasses.replace(said[i], vector=unit_vector(vector))
        exchange = formed[i].exchange
        said_at = max((m.created_at for m in exchange.user_messages), default=rows[i]["occurred_at"])
        for claim in claims[exchange.user_id]:
            verdict = claim.verdict(with_meaning, reply_said.get(i), rows[i]["content"], said_at=said_at)
            if verdict is Verdict.RESTATED:
                restated.add(claim.id)
            elif verdict is Verdict.SUPERSEDED:
                superseded.setdefault(i, claim.id)
    # The user's newest word wins over the claim in the same batch: what restates it is no longer held.
    return {i: c for i, c in superseded.items() if c not in restated}, restated


async def _nearest(
    store: MemoryStore,
    personality_id: int,
    rows: Sequence[dict[str, Any]],
    vectors: Sequence[list[float]],
    kept: Sequence[int],
) -> dict[int, list[tuple[uuid.UUID, float]]]:
    """For each kept row, the user's stored memories at least REPEAT_CLOSENESS from it (one index
    search each)."""
    index = await store.ready()
    nearest: dict[int, list[tuple[uuid.UUID, float]]] = {}
    for i in kept:
        flt = RecallFilter(personality_id=personality_id, user_id=rows[i]["user_id"])
        found = await index.search(dense=vectors[i], sparse=None, flt=flt, limit=REPEAT_CANDIDATES)
        nearest[i] = [
            (h.id, h.score) for h in found.dense if h.score >= REPEAT_CLOSENESS and h.id != rows[i]["id"]
        ]
    return nearest
