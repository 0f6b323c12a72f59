"""What an exchange is remembered as, and the memory row it makes.

The mode its user and personality chose decides: verbatim (the exchange as said), cleaned (too short
to gain from a summary), or summarized (by the LLM, or extractively), with the verbatim text kept too
in hybrid mode. A summary that dropped a key fact carries it: the memory's text is the summary, then
the cleaned sentences that hold the dropped facts, each after its speaker's name, so recall, the
prompt and /memory show one text holding every fact. A summarized memory is never stored bigger than
its cleaned exchange: when it would be, the cleaned exchange is the memory. Kept apart from the batch
machinery of memory.formation.forming: this is the only part that waits on the LLM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory.formation.cleaning import clean_transcript
from memory.formation.exchanges import Exchange
from memory.formation.extractive import split_sentences
from memory.formation.fidelity import Facts, key_facts, vocabulary
from memory.formation.summarizer import (
    ExchangeSummarizer,
    ExchangeText,
    FallbackReason,
    Quoted,
    SummaryResult,
)
from memory.recall.store import memory_id
from memory.tokens import count_tokens
from memory.types import MemoryMode, MemoryState, MessageRole, ModelConfig, ProgressCallback
from models import Conversation, Personality

CLEANED = "cleaned"
VERBATIM = "verbatim"
_LABEL = ": "


@dataclass(frozen=True, slots=True)
class Shaped:
    """An exchange's memory text, before it is embedded and written."""

    exchange: Exchange
    mode: MemoryMode
    content: str
    content_verbatim: str | None
    summarized: bool
    summarizer: str
    misses: list[str]  # the key facts the summary dropped, carried in `content`
    source_chars: int
    fallback: str | None = None  # why the summary is extractive (memory.formation.summarizer)
    fallback_detail: str | None = None


async def shape_exchanges(
    exchanges: Sequence[tuple[Exchange, MemoryMode]],
    personality: Personality,
    cfg: ModelConfig | None,
    prompt: str | None,
    *,
    summarizer: ExchangeSummarizer,
    min_summarize_tokens: int,
    progress: ProgressCallback | None = None,
) -> list[Shaped]:
    """The exchanges as their memories keep them (see the module docstring), in order.

    The exchanges to summarize go to the summarizer together, in the order they were said: in a
    shared channel an exchange's context is then often the exchange before it, quoted once. Each
    summary is checked against its own user's lines (memory.formation.summarizer). `progress` is
    told of the summarized exchanges as their calls settle them.
    """
    name = personality.display_name
    shaped: list[Shaped | None] = []
    waiting: list[tuple[int, Exchange, MemoryMode, str, str]] = []
    for exchange, mode in exchanges:
        verbatim = exchange.render(personality_name=name)
        # Characters, as Postgres `length()` counts the stored text: the storage figures compare alike.
        if mode is MemoryMode.VERBATIM:
            shaped.append(Shaped(exchange, mode, verbatim, None, False, VERBATIM, [], len(verbatim)))
            continue
        cleaned = clean_transcript(verbatim)
        if count_tokens(cleaned) < min_summarize_tokens:
            # Too short to gain from a summary: the cleaned text is the memory (or the original,
            # when cleaning left nothing worth searching, as with an emoji-only exchange).
            content = cleaned if cleaned.strip() and len(cleaned) < len(verbatim) else verbatim
            keep = verbatim if mode is MemoryMode.HYBRID else None
            shaped.append(Shaped(exchange, mode, content, keep, False, CLEANED, [], len(verbatim)))
            continue
        waiting.append((len(shaped), exchange, mode, verbatim, cleaned))
        shaped.append(None)
    # Who said each line these exchanges hold or quote: a reply is another user's only when the line it
    # answers is, however far back that line is.
    authors = {
        m.external_id: m.author_id
        for exchange, _ in exchanges
        for m in (*exchange.context, *exchange.messages)
        if m.role is not MessageRole.ASSISTANT
    }
    texts = [summarizer_text(exchange, name, authors) for _, exchange, _, _, _ in waiting]
    results = await summarizer.summarize_exchanges(texts, cfg=cfg, prompt=prompt, progress=progress)
    for (index, exchange, mode, verbatim, cleaned), text, result in zip(waiting, texts, results, strict=True):
        content, carried = memory_text(cleaned, result.text, names=text.names)
        credited, reason, detail = result.summarizer, _reason(result), result.detail
        if content == cleaned and result.text != cleaned:
            # The summary with its carried facts was not smaller: the cleaned exchange is what is
            # stored, and it is credited as such, not to the model that did not write it.
            credited = CLEANED
            reason = reason or FallbackReason.NOT_SMALLER.value
            detail = detail or "summary and carried facts not smaller than the exchange"
        shaped[index] = Shaped(
            exchange,
            mode,
            content,
            verbatim if mode is MemoryMode.HYBRID else None,
            True,
            credited,
            carried,
            len(verbatim),
            reason,
            detail,
        )
    return [s for s in shaped if s is not None]


def _reason(result: SummaryResult) -> str | None:
    return result.reason.value if result.reason is not None else None


def summarizer_text(
    exchange: Exchange, personality_name: str, authors: Mapping[str, str] | None = None
) -> ExchangeText:
    """The exchange as the summarizer reads it: its lines, and the lines before it quoted with who
    said them; another user's lines, and the personality's replies to them, marked as theirs.

    A reply is another user's when the line it answers is (`authors`: who said each user line known);
    one answering a line nobody here knows is another user's only where other users speak.
    """
    said = {m.external_id: m.author_id for m in exchange.context if m.role is not MessageRole.ASSISTANT}
    authors = {**(authors or {}), **said}
    others_speak = any(author != exchange.user_id for author in authors.values())
    quoted = []
    for message in exchange.context:
        if message.role is MessageRole.ASSISTANT:
            answered = authors.get(message.reply_to or "")
            other = answered != exchange.user_id if answered is not None else others_speak
            speaker = f"{personality_name} (answering another user)" if other else personality_name
        else:
            other = message.author_id != exchange.user_id
            speaker = message.author_name or "User"
            speaker = f"{speaker} (another user)" if other else speaker
        quoted.append(Quoted(message.external_id, speaker, message.content, other))
    names = {personality_name, *(m.author_name for m in exchange.user_messages if m.author_name)}
    return ExchangeText(
        exchange.render(personality_name=personality_name),
        tuple(quoted),
        tuple(sorted(names)),
        frozenset(exchange.source_message_ids),
        owner=exchange.user_id,
    )


def memory_text(cleaned: str, summary: str, *, names: Sequence[str] = ()) -> tuple[str, list[str]]:
    """The memory's text for a summary of the cleaned exchange, and the facts it carries.

    The summary, then the cleaned sentences holding the facts it dropped (after their speaker's
    name); the cleaned exchange itself when that is not longer.
    """
    facts = key_facts(cleaned, names=names)
    missed = vocabulary(summary).holds(facts)
    if not missed:
        return summary, []
    carried = _carried_sentences(cleaned, facts, missed, {*names, "User"})
    content = f"{summary}\n{carried}"
    if len(content) >= len(cleaned):
        return cleaned, []
    return content, missed


def _carried_sentences(cleaned: str, facts: Facts, missed: list[str], speakers: set[str]) -> str:
    """The fewest cleaned sentences that hold the missed facts (greedy cover), in their order, each
    line opened by its speaker."""
    wanted = facts.only(missed)
    candidates: list[tuple[int, str, str, set[str]]] = []  # (position, speaker, sentence, facts held)
    speaker = ""
    for line in cleaned.splitlines():
        label, separator, said = line.partition(_LABEL)
        if separator and label in speakers:
            speaker = label
        else:
            said = line  # a message's later line: still its speaker's
        for sentence, _ in split_sentences(said):
            held = set(missed) - set(vocabulary(sentence).holds(wanted))
            if held:
                candidates.append((len(candidates), speaker, sentence, held))
    uncovered = set(missed)
    chosen: list[tuple[int, str, str, set[str]]] = []
    while uncovered:
        best = max(
            candidates,
            key=lambda c: (len(c[3] & uncovered) / max(1, len(c[2])), -c[0]),
            default=None,
        )
        if best is None or not best[3] & uncovered:
            break
        chosen.append(best)
        uncovered -= best[3]
    chosen.sort()
    lines: list[str] = []
    last_speaker: str | None = None
    for _, speaker, sentence, _ in chosen:
        if speaker == last_speaker and lines:
            lines[-1] += f" {sentence}"
        else:
            lines.append(f"{speaker}: {sentence}" if speaker else sentence)
            last_speaker = speaker
    if uncovered:  # a fact no single sentence holds (split across two): the fact itself
        lines.append(", ".join(sorted(uncovered)))
    return "\n".join(lines)


def memory_row(conversation: Conversation, shaped: Shaped, embedding_model: str) -> dict[str, Any]:
    """The `memories` row of a shaped exchange, its id derived from its source messages."""
    exchange = shaped.exchange
    return {
        "id": memory_id(conversation.personality_id, conversation.venue_key, exchange.source_message_ids),
        "personality_id": conversation.personality_id,
        "user_id": exchange.user_id,
        "guild_id": conversation.guild_id,
        "channel_id": conversation.channel_id,
        "is_dm": conversation.is_dm,
        "conversation_id": conversation.id,
        "mode": shaped.mode.value,
        "content": shaped.content,
        "content_verbatim": shaped.content_verbatim,
        "source_chars": shaped.source_chars,
        "summarized": shaped.summarized,
        "summarizer": shaped.summarizer,
        "summary_fallback": shaped.fallback,
        "source_message_ids": exchange.source_message_ids,
        "occurred_at": exchange.occurred_at,
        "fidelity_misses": shaped.misses,
        "state": MemoryState.FORMED.value,
        "embedding_model": embedding_model,
        # A repeat of what the user said before changes these (memory.formation.repeats).
        "times_said": 1,
        "last_said_at": None,
        "repeat_of": None,
    }
