"""What one exchange is remembered as, and the memory row it makes.

The mode its user and personality chose decides: verbatim (the exchange as said), cleaned (too short
to gain from a summary), or summarized by the LLM, keeping the verbatim text too in hybrid mode or
when the summary lost a fact. Kept apart from the batch machinery of memory.formation.forming: this is
the only part that waits on the LLM, one exchange at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.formation.cleaning import strip_chat_template_tokens, strip_roleplay_formatting
from memory.formation.exchanges import Exchange
from memory.formation.fidelity import fidelity_misses
from memory.formation.summarizer import ExchangeSummarizer
from memory.recall.store import memory_id
from memory.tokens import count_tokens
from memory.types import MemoryMode, MemoryState, ModelConfig
from models import Conversation, Personality

CLEANED = "cleaned"
VERBATIM = "verbatim"


@dataclass(frozen=True, slots=True)
class Shaped:
    """An exchange's memory text, before it is embedded and written."""

    exchange: Exchange
    mode: MemoryMode
    content: str
    content_verbatim: str | None
    summarized: bool
    summarizer: str
    misses: list[str]
    source_chars: int


async def shape_exchange(
    exchange: Exchange,
    mode: MemoryMode,
    personality: Personality,
    cfg: ModelConfig | None,
    prompt: str | None,
    *,
    summarizer: ExchangeSummarizer,
    min_summarize_tokens: int,
) -> Shaped:
    """The exchange as its memory keeps it (see the module docstring)."""
    verbatim = exchange.render(personality_name=personality.display_name)
    # Characters, as Postgres `length()` counts the stored text: the storage figures compare alike.
    source_chars = len(verbatim)
    if mode is MemoryMode.VERBATIM:
        return Shaped(exchange, mode, verbatim, None, False, VERBATIM, [], source_chars)
    cleaned = strip_roleplay_formatting(strip_chat_template_tokens(verbatim))
    if count_tokens(cleaned) < min_summarize_tokens:
        # Too short to gain from a summary: the cleaned text is the memory (or the original,
        # when cleaning left nothing worth searching, as with an emoji-only exchange).
        content = cleaned if cleaned.strip() and len(cleaned) < len(verbatim) else verbatim
        keep = verbatim if mode is MemoryMode.HYBRID else None
        return Shaped(exchange, mode, content, keep, False, CLEANED, [], source_chars)
    result = await summarizer.summarize(
        verbatim,
        cfg=cfg,
        prompt=prompt,
        context=exchange.render_context(personality_name=personality.display_name),
    )
    # Facts are checked against the cleaned text: a name only inside an *action* is roleplay.
    misses = fidelity_misses(cleaned, result.text)
    keep_verbatim = mode is MemoryMode.HYBRID or bool(misses)
    return Shaped(
        exchange,
        mode,
        result.text,
        verbatim if keep_verbatim else None,
        True,
        result.summarizer,
        misses,
        source_chars,
    )


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
        "source_message_ids": exchange.source_message_ids,
        "occurred_at": exchange.occurred_at,
        "fidelity_misses": shaped.misses,
        "state": MemoryState.FORMED.value,
        "embedding_model": embedding_model,
    }
