"""Group a conversation's stored messages into the exchanges that become memories."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memory.formation.cleaning import strip_chat_template_tokens
from memory.types import MessageRole
from models import Message

CONTEXT_MESSAGES = 3


@dataclass(frozen=True, slots=True)
class LoggedMessage:
    """A message as the grouping sees it (a plain copy of a `messages` row)."""

    id: int
    external_id: str
    author_id: str
    author_name: str | None
    role: MessageRole
    content: str
    created_at: datetime

    @classmethod
    def of(cls, message: Message) -> LoggedMessage:
        """A plain copy of a stored message."""
        return cls(
            id=message.id,
            external_id=message.external_id,
            author_id=message.author_id,
            author_name=message.author_name,
            role=MessageRole(message.role),
            content=message.content,
            created_at=message.created_at,
        )


class Spoken(Protocol):
    """Anything said by someone: a logged message, a stored `messages` row."""

    @property
    def role(self) -> str: ...

    @property
    def author_name(self) -> str | None: ...

    @property
    def content(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Exchange:
    """One user's message(s) and the personality's reply, with the messages just before as context."""

    user_id: str
    user_messages: tuple[LoggedMessage, ...]
    replies: tuple[LoggedMessage, ...]
    context: tuple[LoggedMessage, ...]
    # Messages consumed by this exchange without being part of it (other users' lines in the run).
    bystanders: tuple[LoggedMessage, ...] = ()

    @property
    def messages(self) -> tuple[LoggedMessage, ...]:
        return self.user_messages + self.replies

    @property
    def source_message_ids(self) -> list[str]:
        return [m.external_id for m in self.messages]

    @property
    def occurred_at(self) -> datetime:
        return self.replies[-1].created_at

    def render(self, *, user_name: str | None = None, personality_name: str = "Assistant") -> str:
        """The exchange as `Name: text` lines: what verbatim memories store and summarizers read."""
        return render_lines(self.messages, user_name=user_name, personality_name=personality_name)

    def render_context(self, *, personality_name: str = "Assistant") -> str:
        return render_lines(self.context, personality_name=personality_name)


def render_lines(
    messages: Iterable[Spoken],
    *,
    user_name: str | None = None,
    personality_name: str = "Assistant",
    one_line: bool = False,
) -> str:
    """Messages as `Speaker: text` lines, the one transcript form memories store and models read.

    With one_line, each message's text is put on its single line, chat-template tokens removed: a
    transcript whose lines are cut later (keeping the most recent) then never loses a speaker.
    """
    lines = []
    for message in messages:
        if message.role == MessageRole.ASSISTANT:
            speaker = personality_name
        else:
            speaker = message.author_name or user_name or "User"
        text = " ".join(strip_chat_template_tokens(message.content).split()) if one_line else message.content
        lines.append(f"{speaker}: {text.strip()}")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Grouping:
    exchanges: list[Exchange]
    # Messages that end no exchange and never will (a reply with no user message before it).
    orphans: list[LoggedMessage]
    # Trailing user messages still waiting for a reply: they stay pending.
    waiting: list[LoggedMessage]


def group_exchanges(messages: Sequence[LoggedMessage], *, history: Sequence[LoggedMessage] = ()) -> Grouping:
    """Split messages (oldest first) into complete exchanges.

    A run of user messages followed by one or more replies is an exchange of the last user who
    spoke in the run; lines of other users in that run are bystanders (in a shared channel the reply
    answers the last speaker). Consecutive replies (a long answer split in parts) belong together.
    `history` holds already-processed messages before `messages`, used only for context.
    """
    exchanges: list[Exchange] = []
    orphans: list[LoggedMessage] = []
    run: list[LoggedMessage] = []
    seen: list[LoggedMessage] = list(history[-CONTEXT_MESSAGES:])
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.role is MessageRole.USER:
            run.append(message)
            index += 1
            continue
        replies = [message]
        index += 1
        while index < len(messages) and messages[index].role is MessageRole.ASSISTANT:
            replies.append(messages[index])
            index += 1
        if not run:
            orphans.extend(replies)
            seen.extend(replies)
            continue
        speaker = run[-1].author_id
        own = tuple(m for m in run if m.author_id == speaker)
        others = tuple(m for m in run if m.author_id != speaker)
        first = run.index(own[0])
        context = tuple((seen + run[:first])[-CONTEXT_MESSAGES:])
        exchanges.append(
            Exchange(
                user_id=speaker, user_messages=own, replies=tuple(replies), context=context, bystanders=others
            )
        )
        seen.extend(run)
        seen.extend(replies)
        run = []
    return Grouping(exchanges=exchanges, orphans=orphans, waiting=run)
