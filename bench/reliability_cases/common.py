"""What several cases do: a chat turn as the chat cog takes it, ids like Discord's, tags to trace text.

A turn is `ChatService.answer`, the one the chat cog runs: the reply is stored under an id taken when
it is sent, as Discord gives one, and the exchange is formed before the turn returns.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory.chat.service import ChatReply, ChatRequest
from testkit.chat import ReplyRecorder, chat_request

if TYPE_CHECKING:
    from memory.chat.service import ChatService

_snowflakes = itertools.count(1_300_000_000_000_000_000)
TAG_RE = re.compile(r"\bt(\d+)u(\d+)m(\d+)x\b")


def snowflake() -> str:
    """An increasing numeric id, as Discord gives messages in the order they are sent."""
    return str(next(_snowflakes))


def tag(run: int, user: int, message: int) -> str:
    """A word that marks one message (and the reply that echoes it) wherever its text ends up."""
    return f"t{run}u{user}m{message}x"


def tags_in(text: str) -> list[tuple[int, int, int]]:
    return [(int(a), int(b), int(c)) for a, b, c in TAG_RE.findall(text)]


def request(
    personality_id: int,
    user_id: str,
    text: str,
    *,
    user_name: str | None = None,
    guild_id: str | None = None,
    channel_id: str | None = None,
    message_id: str | None = None,
) -> ChatRequest:
    return chat_request(
        personality_id,
        text,
        user_id=user_id,
        user_name=user_name or f"user{user_id}",
        guild_id=guild_id,
        channel_id=channel_id if channel_id is not None else (None if guild_id else f"dm-{user_id}"),
        message_id=message_id or snowflake(),
        created_at=datetime.now(UTC),
    )


class SentAsSnowflake(ReplyRecorder):
    """A reply stored under a snowflake taken when it is sent, after the message it answers."""

    async def deliver(self, reply: ChatReply) -> Sequence[tuple[str, str]]:
        self.part_ids = (snowflake(),)
        return await super().deliver(reply)


async def chat_turn(chat: ChatService, req: ChatRequest) -> ChatReply:
    """One message answered as the chat cog answers it; a failed reply is not stored (the notice is)."""
    return (await chat.answer(req, SentAsSnowflake())).reply


async def stored_exchange(chat: ChatService, req: ChatRequest, reply_text: str) -> None:
    """A message and the reply to it in the log, not formed: as the catch-up stores a reply it finds
    in a channel's history."""
    async with chat.catching_up(req.channel_id or "") as filing:
        await filing.message(req)
        await filing.reply(req.personality_id, snowflake(), reply_text)


def is_clear_notice(text: str) -> bool:
    """Short, one paragraph, no traceback or exception names: what a user can read at a glance."""
    lowered = text.lower()
    return (
        0 < len(text) <= 200
        and "traceback" not in lowered
        and "exception" not in lowered
        and "error:" not in lowered
    )


def count_by(items: Iterable[Any]) -> dict[Any, int]:
    counts: dict[Any, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


def memory_text(memory: Mapping[str, Any]) -> str:
    """Everything a memory keeps: its content and the verbatim text kept beside a summary."""
    return (memory["content"] or "") + "\n" + (memory["content_verbatim"] or "")


def figures(**values: Any) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items())


async def run_command(runtime: Any, *argv: str) -> tuple[int, str, str]:
    """`personae ARGV` through the CLI's own parser and handler, in this process on this runtime:
    exit code, stdout, and the line `personae` would print (a traceback's last line marked as such)."""
    import contextlib
    import io

    from bot.cli import build_parser
    from bot.cli.output import CommandError
    from memory.errors import UserFacingError

    args = build_parser().parse_args(list(argv))
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            await args.handler(args, runtime)
    except (CommandError, UserFacingError) as exc:
        return 1, out.getvalue(), f"personae: {exc}"
    except SystemExit as exc:  # `reindex --check` exits 1 on drift
        return int(exc.code or 0), out.getvalue(), ""
    except Exception as exc:
        return 2, out.getvalue(), f"Traceback: {type(exc).__name__}: {str(exc)[:200]}"
    return 0, out.getvalue(), ""
