"""Group a conversation's stored messages into the exchanges that become memories."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.types import MessageRole

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
    messages: Sequence[LoggedMessage], *, user_name: str | None = None, personality_name: str = "Assistant"
) -> str:
    lines = []
    for message in messages:
        if message.role is MessageRole.ASSISTANT:
            speaker = personality_name
        else:
            speaker = message.author_name or user_name or "User"
        lines.append(f"{speaker}: {message.content.strip()}")
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
