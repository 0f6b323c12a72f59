"""The reply itself: the personality's model streamed into whole text, capped and cleaned, or a short
neutral notice when the model fails (the user's message stays stored and joins the next exchange)."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

from memory.chat.turns import (
    CUT_REPLY,
    MISCONFIGURED_REPLY,
    NO_CHAT_MODEL,
    UNAVAILABLE_REPLY,
    ChatModelMissingError,
    ChatReply,
    PreparedReply,
    cap_reply,
    clean_reply,
)
from memory.llm import LLMClient, LLMConfigError, LLMUnavailableError

log = logging.getLogger(__name__)


async def _stream(llm: LLMClient, prepared: PreparedReply) -> AsyncGenerator[str, None]:
    """The reply text in pieces as the model writes it; raises ChatModelMissingError."""
    if prepared.cfg is None or prepared.context is None:
        raise ChatModelMissingError(NO_CHAT_MODEL)
    async for piece in llm.stream(prepared.cfg, prepared.messages_to_answer):
        yield piece


async def generate_reply(
    llm: LLMClient, prepared: PreparedReply, on_text: Callable[[str], bool | None], *, max_chars: int
) -> ChatReply:
    """The whole reply (at most `max_chars`, whatever the model sends), or a notice."""
    if prepared.cfg is None:
        return ChatReply(NO_CHAT_MODEL, ok=False, prepared=prepared, error="no chat model")
    pieces: list[str] = []
    size = 0
    try:
        async with aclosing(_stream(llm, prepared)) as stream:
            async for piece in stream:
                if on_text(piece) is False:  # the reader stopped the reply here (a terminal's Ctrl-C)
                    break
                pieces.append(piece)
                if (size := size + len(piece)) > max_chars:
                    break  # a model ignoring max_tokens: the rest would be cut anyway
    except LLMUnavailableError as exc:
        log.warning("Chat model failed for %s: %s", prepared.personality.name, exc)
        # Cut partway (a deadline, a dropped stream): a half answer is not posted as a whole one.
        notice = CUT_REPLY if pieces else UNAVAILABLE_REPLY
        return ChatReply(notice, ok=False, prepared=prepared, error=str(exc))
    except LLMConfigError as exc:
        log.error("Chat model misconfigured for %s: %s", prepared.personality.name, exc)
        return ChatReply(MISCONFIGURED_REPLY, ok=False, prepared=prepared, error=str(exc))
    text = cap_reply(clean_reply("".join(pieces)), max_chars)
    if not text:
        return ChatReply(UNAVAILABLE_REPLY, ok=False, prepared=prepared, error="empty reply")
    return ChatReply(text, ok=True, prepared=prepared)
