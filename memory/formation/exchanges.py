"""Group a conversation's logged messages into the exchanges that become memories.

An exchange is built from the reply links (`LoggedMessage.reply_to`), not from adjacency: a user's
message, the replies that answer it, and that user's earlier messages that got no reply of their own.
In a shared channel other users' lines in between are context only, never part of the exchange.
An excluded message (said incognito, or forgotten) and the replies to it are in no exchange and no
exchange's context: they are left out, to be marked done without a memory.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from memory.conversations import LoggedMessage
from memory.formation.cleaning import strip_chat_template_tokens
from memory.types import MessageRole

CONTEXT_MESSAGES = 3
# A line this long after the line before it opens a new session: a reply's further part said after
# it is an exchange of its own (an imported LoCoMo session opens with the personality's line, weeks
# after the user's last one), and no context reaches back across it. Three hours: the parts of one
# reply follow each other within minutes, even from a slow local model or a bot catching up after a
# restart, while a conversation taken up again after a night (or a session days later) is a new
# one. A constant, not a setting: it is what a chat session is, not a property of a deployment.
SILENCE = timedelta(hours=3)


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
    """One user's message(s) and the replies to them, with the messages just before as context.

    `user_messages` is empty for a late reply: one whose message was already remembered (see
    `group_exchanges`).
    """

    user_id: str
    user_messages: tuple[LoggedMessage, ...]
    replies: tuple[LoggedMessage, ...]
    context: tuple[LoggedMessage, ...]

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
    # Replies that answer no message of the log (none before them, or theirs was deleted): they end
    # no exchange and never will; formation marks them done without a memory.
    orphans: list[LoggedMessage]
    # User messages with no reply yet, and none to a later message of their author: they stay pending.
    waiting: list[LoggedMessage]
    # Excluded messages and the replies to them (see the module docstring): done, never remembered.
    excluded: list[LoggedMessage] = field(default_factory=list)


def group_exchanges(log: Sequence[LoggedMessage], *, formable: Collection[str] | None = None) -> Grouping:
    """Build the exchanges of `log` (a conversation's messages, oldest first) from its reply links.

    Only messages whose external id is in `formable` (every message when None) are grouped; the
    others are context, or the already remembered message a formable reply answers.

    - A user message and the formable replies that answer it are one exchange of its author, however
      many other lines came in between; a reply in several parts is one exchange.
    - A user's earlier formable messages that got no reply are part of the exchange of their next
      answered message: nothing they said is dropped, and it is remembered with what followed it
      (the context it belongs to) rather than as a memory of its own that nobody answered. (The
      reader leaves out a message whose reply is still being written: it waits for its own.)
    - A reply whose message was already remembered (taken into a later exchange before this reply
      was stored, by a pass that could not know it was coming) is a late reply: an exchange of that
      user with no user message, so no message is ever part of two memories.
    - A reply that answers nothing in `log` is an orphan; user messages left over are waiting.
    - An excluded user message is in no exchange: with its replies (or alone, when it has none) it
      is `excluded`, and so is a late reply to one. An exchange that has an excluded reply is left
      out whole; the author's earlier unanswered messages then wait for their next exchange.

    The context of an exchange is the CONTEXT_MESSAGES messages of `log` before its first message,
    excluded messages and the replies to them left out.
    """

    def allowed(message: LoggedMessage) -> bool:
        return formable is None or message.external_id in formable

    position = {m.external_id: i for i, m in enumerate(log)}
    hidden = _hidden(log)

    def left_out(message: LoggedMessage, answers: list[LoggedMessage]) -> bool:
        return message.external_id in hidden or any(a.external_id in hidden for a in answers)

    replies: dict[str, list[LoggedMessage]] = {}
    orphans: list[LoggedMessage] = []
    late: list[tuple[LoggedMessage, list[LoggedMessage]]] = []
    resumed: list[tuple[LoggedMessage, list[LoggedMessage]]] = []
    for message in log:
        if message.role is MessageRole.USER or not allowed(message):
            continue
        answered = position.get(message.reply_to) if message.reply_to is not None else None
        if answered is None or log[answered].role is not MessageRole.USER:
            orphans.append(message)
        elif log[answered].external_id in replies and _after_silence(log, position[message.external_id]):
            # A further part said after a long silence: the exchange it would join was over.
            resumed.append((log[answered], [message]))
        elif resumed and resumed[-1][0] is log[answered]:
            resumed[-1][1].append(message)  # the parts after it go with it
        else:
            replies.setdefault(log[answered].external_id, []).append(message)
    earlier: dict[str, list[LoggedMessage]] = {}  # a user's unanswered messages so far
    found: list[tuple[int, Exchange]] = []
    excluded: list[LoggedMessage] = []
    for index, message in enumerate(log):
        if message.role is not MessageRole.USER:
            continue
        answers = replies.pop(message.external_id, [])
        if not allowed(message):
            if answers:
                late.append((message, answers))
            continue
        if left_out(message, answers):
            excluded.extend((message, *answers))
            continue
        if not answers:
            earlier.setdefault(message.author_id, []).append(message)
            continue
        own = (*earlier.pop(message.author_id, []), message)
        context = _context(log, position[own[0].external_id], hidden)
        found.append((index, Exchange(message.author_id, own, tuple(answers), context)))
    for message, answers in late + resumed:
        if left_out(message, answers):
            excluded.extend(answers)
            continue
        first = position[answers[0].external_id]
        found.append((first, Exchange(message.author_id, (), tuple(answers), _context(log, first, hidden))))
    found.sort(key=lambda item: item[0])
    waiting = sorted((m for ms in earlier.values() for m in ms), key=lambda m: position[m.external_id])
    excluded.sort(key=lambda m: position[m.external_id])
    return Grouping(exchanges=[e for _, e in found], orphans=orphans, waiting=waiting, excluded=excluded)


def _after_silence(log: Sequence[LoggedMessage], index: int) -> bool:
    """Whether the line at `index` comes SILENCE or more after the line before it."""
    return index > 0 and log[index].created_at - log[index - 1].created_at >= SILENCE


def _hidden(log: Sequence[LoggedMessage]) -> set[str]:
    """External ids of the excluded messages of `log` and of the replies to them."""
    hidden = {m.external_id for m in log if m.excluded}
    hidden.update(m.external_id for m in log if m.role is not MessageRole.USER and m.reply_to in hidden)
    return hidden


def _context(log: Sequence[LoggedMessage], first: int, hidden: set[str]) -> tuple[LoggedMessage, ...]:
    """The CONTEXT_MESSAGES messages before position `first` that are not hidden, oldest first."""
    context: list[LoggedMessage] = []
    index = first
    while index > 0 and len(context) < CONTEXT_MESSAGES and not _after_silence(log, index):
        index -= 1
        if log[index].external_id not in hidden:
            context.append(log[index])
    return tuple(reversed(context))
