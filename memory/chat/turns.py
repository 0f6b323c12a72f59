"""One turn of a chat as it flows through the chat service: the request, the prepared prompt, the reply,
the notices shown when there is no reply, where the reply goes (`ReplyDelivery`), what the turn did
(`ChatTurn`), and the reply's rows as the message log stores them."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from memory.conversations import LoggedMessage
from memory.errors import InvalidInputError
from memory.formation.cleaning import strip_chat_template_tokens
from memory.recall.receipts import memories_seen
from memory.tokens import count_message_tokens
from memory.types import MessageRole, ModelConfig
from models import Personality

if TYPE_CHECKING:  # the front doors import this module at start-up: only what it runs on
    from memory.chat.after_reply import AfterReplyReport
    from memory.chat.prompt import BuiltContext
    from memory.recall.search import RecalledMemory

NO_CHAT_MODEL = (
    "No chat model is configured: set CHAT_MODEL to a litellm model string, for example "
    "CHAT_MODEL=ollama/llama3.1 (with CHAT_API_BASE=http://localhost:11434) or "
    "CHAT_MODEL=openai/gpt-4o-mini (with CHAT_API_KEY)."
)
UNAVAILABLE_REPLY = "(I can't answer right now: my language model is unavailable. Please try again later.)"
MISCONFIGURED_REPLY = (
    "(I can't answer: my language model is misconfigured. An admin has been told in the logs.)"
)
# The model's stream stopped partway (its idle or total deadline): the partial answer is not posted.
CUT_REPLY = "(My answer was cut off: my language model stopped partway through. Please ask again.)"
# Ends a reply cut at the deployment's REPLY_MAX_CHARS (a model that ignores max_tokens).
REPLY_CUT_NOTE = "\n\n(Reply cut at {limit:,} characters.)"


class ChatModelMissingError(InvalidInputError):
    """No chat model for this personality or the deployment."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One incoming message addressed to a personality."""

    personality_id: int
    user_id: str
    user_name: str
    guild_id: str | None
    channel_id: str | None
    message_id: str
    text: str
    created_at: datetime | None = None
    # The external ids of the reply this answer takes the place of (🔄), in order; empty: a first answer.
    replaces: tuple[str, ...] = ()
    # With `replaces`: the start of that reply, which the model goes on from (the terminal's /continue).
    continues: str = ""


@dataclass(slots=True)
class PreparedReply:
    """A stored user message and, when there is a chat model, the prompt to answer it."""

    request: ChatRequest
    personality: Personality
    conversation_id: int
    cfg: ModelConfig | None
    context: BuiltContext | None = None
    # The recalled memories the prompt holds, in its order: what the reply's receipt shows.
    memories: Sequence[RecalledMemory] = ()

    @property
    def messages_to_answer(self) -> list[dict[str, str]]:
        """The prompt's messages, then the reply's start when the model goes on from it (`continues`)."""
        assert self.context is not None
        start = self.request.continues
        return [*self.context.messages, *([{"role": "assistant", "content": start}] if start else [])]

    @property
    def memories_seen(self) -> int:
        """How many memories the prompt holds: those recalled and the context they brought."""
        return len(memories_seen(self.memories))


@dataclass(slots=True)
class ChatReply:
    text: str
    ok: bool  # False: `text` is the error notice, nothing was stored for it
    prepared: PreparedReply
    error: str | None = None


class ReplyDelivery(Protocol):
    """Where a turn's reply goes: sent to Discord, printed in the terminal, put in place of an earlier
    reply (🔄). The chat service calls it in this order: `writing` around the model's call (each piece
    of text to `on_text` as it comes), `deliver` once, `recorded` once the reply is stored, then
    `remembered` after formation. A class that derives from it inherits the defaults (do nothing) of
    all but `deliver`."""

    def writing(self) -> AbstractAsyncContextManager[None]:
        """Held while the model writes (Discord's typing indicator); nothing by default."""
        return nullcontext()

    def on_text(self, piece: str) -> bool | None:
        """A piece of the reply as the model writes it (the terminal prints it); nothing by default.
        False: the reader stopped the reply before this piece, which ends as far as it went."""
        return None

    async def deliver(self, reply: ChatReply) -> Sequence[tuple[str, str]]:
        """Show the reply, or its notice when it is not ok; returns the parts of an ok reply as they were
        sent, (external id, text) each, which the log stores as the reply (none: nothing was sent)."""
        ...

    async def recorded(self) -> None:
        """The delivered reply is stored in the log (the terminal's next prompt waits for it, so Ctrl-C
        cannot lose it); nothing by default."""
        return None

    async def remembered(self, message_ids: Sequence[str]) -> None:
        """These user messages just became memories (Discord's 📝); nothing by default."""
        return None


@dataclass(slots=True)
class ChatTurn:
    """What one turn did: the reply (or its notice), the parts stored, and the work after it."""

    reply: ChatReply
    parts: list[tuple[str, str]] = field(default_factory=list)
    after: AfterReplyReport | None = None  # None: no reply was stored, so nothing was formed


def count_with(cfg: ModelConfig | None, messages: list[dict[str, Any]]) -> int:
    """Tokens of `messages` for the chat model (or the default counter without one)."""
    return count_message_tokens(messages, cfg.model if cfg else None)


def clean_reply(text: str) -> str:
    """Model output without chat-template tokens that could start a fake turn."""
    return strip_chat_template_tokens(text).strip()


def cap_reply(text: str, limit: int) -> str:
    """The reply within `limit` characters: whole, or cut at a word with a note that says it was cut."""
    if len(text) <= limit:
        return text
    note = REPLY_CUT_NOTE.format(limit=limit)
    head = text[: max(0, limit - len(note))]
    space = head.rfind(" ")
    if space > len(head) // 2:  # at a word, unless that throws most of it away
        head = head[:space]
    return head.rstrip() + note


def reply_messages(
    prepared: PreparedReply, parts: Sequence[tuple[str, str]], *, created_at: datetime
) -> list[LoggedMessage]:
    """The reply's parts, (external id, text) each, as the log stores them: each records the message
    it answers, so memories follow that link whatever order replies end in."""
    personality = prepared.personality
    return [
        LoggedMessage(
            external_id=external_id,
            author_id=f"personality:{personality.name}",
            author_name=personality.display_name,
            role=MessageRole.ASSISTANT,
            content=text,
            created_at=created_at,
            token_count=count_with(prepared.cfg, [{"role": "assistant", "content": text}]),
            reply_to=prepared.request.message_id,
        )
        for external_id, text in parts
    ]
