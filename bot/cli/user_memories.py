"""`personae memory list|search|show|forget|pin|correct|used|fresh|export`: one user's memories, as
/memory shows and steers them in Discord, through the same MemoryService operations and the same
rules: every command names the user, and reads or changes only that user's memories."""

from __future__ import annotations

import argparse
import re
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli.output import CommandError, check_id, confirm, print_table

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Core, Runtime
    from memory.service import BrowsedMemory, ReplyReceipt
    from models import Personality

USER_HELP = "whose memories: their Discord user id (a user only ever sees their own)"
SCOPE_HELP = "only this personality's memories (default: every personality's)"
ID_HELP = "the memory's id, as `personae memory list` or `search` shows it, or its first characters"
TEXT_SHOWN = 70  # characters of a memory on a listing's line
ID_TEXT = re.compile(r"[0-9a-fA-F-]{1,36}")  # an id, or its first characters


def add_commands(memory: Subcommands) -> None:
    """The subcommands of `personae memory` about one user's memories."""
    listing = memory.add_parser("list", help="a user's memories, newest first")
    _user_options(listing, scope=True)
    listing.add_argument("--limit", type=int, default=20, help="memories shown, 1 to 100 (default 20)")
    listing.add_argument("--offset", type=int, default=0, help="memories skipped first (default 0)")
    listing.set_defaults(handler=cmd_memory_list, index_when_used=True)

    search = memory.add_parser("search", help="a user's memories that best match a query, best first")
    search.add_argument("query", help="what to look for")
    _user_options(search, scope=True)
    search.add_argument("--limit", type=int, default=10, help="memories shown, 1 to 50 (default 10)")
    search.set_defaults(handler=cmd_memory_search, with_memory=True, embeds=True)

    show = memory.add_parser(
        "show",
        help="one memory, whole: how it was made, what it keeps, where it came from",
        description="One memory, whole: its text, how it was made (verbatim, cleaned, summarized by which "
        "model, or extractive and why), the key facts it keeps and those it carries, the messages and "
        "conversation it came from, the original a hybrid memory keeps, pinned, edited.",
    )
    show.add_argument("id", help=ID_HELP)
    _user_options(show, scope=False)
    show.set_defaults(handler=cmd_memory_show, index_when_used=True)

    forget = memory.add_parser(
        "forget", help="delete one memory, or all of a user's (asks first)", description="Delete for good."
    )
    forget.add_argument("id", help=ID_HELP + ", or 'all'")
    _user_options(forget, scope=True)
    forget.add_argument("-y", "--yes", action="store_true", help="with 'all': do not ask for confirmation")
    forget.set_defaults(handler=cmd_memory_forget, with_memory=True)

    pin = memory.add_parser(
        "pin", help="pin a memory: recalled first when relevant, its exchange kept word for word"
    )
    pin.add_argument("id", help=ID_HELP)
    _user_options(pin, scope=False)
    pin.add_argument("--unpin", action="store_true", help="unpin it instead")
    pin.set_defaults(handler=cmd_memory_pin, index_when_used=True)

    correct = memory.add_parser(
        "correct",
        help="replace a memory's text with a correction (what was said is kept beside it)",
    )
    correct.add_argument("id", help=ID_HELP)
    correct.add_argument("text", help="the corrected memory")
    _user_options(correct, scope=False)
    correct.set_defaults(handler=cmd_memory_correct, with_memory=True, embeds=True)

    used = memory.add_parser(
        "used", help="the memories a stored reply used (its receipt), for the user it answered"
    )
    used.add_argument("message_id", metavar="MESSAGE_ID", help="the reply's id, or the message's it answers")
    _user_options(used, scope=False)
    used.set_defaults(handler=cmd_memory_used, index_when_used=True)

    fresh = memory.add_parser(
        "fresh", help="fresh mode: replies use none of a user's memories (they still form)"
    )
    fresh.add_argument("state", choices=["on", "off"], help="on or off")
    _user_options(fresh, scope=True)
    fresh.set_defaults(handler=cmd_memory_fresh)

    export = memory.add_parser(
        "export", help="write a user's memories as JSONL that `personae import` reads back"
    )
    _user_options(export, scope=True)
    export.add_argument("-o", "--output", type=Path, help="file to write (default: standard output)")
    export.set_defaults(handler=cmd_memory_export)


def _user_options(parser: argparse.ArgumentParser, *, scope: bool) -> None:
    parser.add_argument("--user", required=True, help=USER_HELP)
    if scope:
        parser.add_argument("--personality", help=SCOPE_HELP)


async def _scope(core: Core, args: argparse.Namespace) -> tuple[str, Personality | None]:
    """The user, and the personality the command is limited to (None: all of them)."""
    user = check_id(str(args.user), "--user")
    name = getattr(args, "personality", None)
    return user, (await core.personalities.get(name) if name else None)


async def _memory_id(runtime: Runtime, user: str, text: str) -> uuid.UUID:
    """The user's memory that `text` names: its id, or a unique prefix of it (as git takes commits)."""
    from memory.errors import NotFoundError

    if not ID_TEXT.fullmatch(text.strip()):
        raise CommandError(f"{text!r} is not a memory id; `personae memory list` shows them")
    try:
        return await runtime.memory.memory_id(user_id=user, text=text)
    except NotFoundError:
        whole = len(text.strip()) == len(str(uuid.UUID(int=0)))
        named = f"with id {text.strip()}" if whole else f"whose id starts with {text.strip()}"
        raise CommandError(f"User {user} has no memory {named}") from None


def _limit(value: int, most: int) -> int:
    if not 1 <= value <= most:
        raise CommandError(f"The --limit must be between 1 and {most}")
    return value


def _line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= TEXT_SHOWN else flat[: TEXT_SHOWN - 1] + "…"


async def _short_ids(runtime: Runtime, user: str, ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The ids as a listing shows them: each one's shortest unique prefix, as `memory show` takes it."""
    return await runtime.memory.short_ids(user_id=user, ids=ids)


def _id_column(short: dict[uuid.UUID, str]) -> tuple[str, int]:
    return ("ID", max(map(len, short.values()), default=8))


def _print_memories(memories: list[BrowsedMemory], short: dict[uuid.UUID, str]) -> None:
    rows = [
        (
            short.get(m.id, str(m.id)),
            f"{m.occurred_at:%Y-%m-%d}",
            m.personality_name[:16],
            ("[pinned] " if m.pinned else "")
            + ("[edited] " if m.edited else "")
            + ("[superseded] " if m.superseded else "")
            + _line(m.content),
        )
        for m in memories
    ]
    print_table([_id_column(short), ("DATE", 10), ("PERSONALITY", 16), ("MEMORY", 0)], rows, empty="")


def _of(user: str, p: Personality | None) -> str:
    return f"of user {user}" + (f" with {p.display_name}" if p else "")


async def cmd_memory_list(args: argparse.Namespace, runtime: Runtime) -> None:
    user, p = await _scope(runtime, args)
    limit = _limit(args.limit, 100)
    if args.offset < 0:
        raise CommandError("The --offset can't be negative")
    page = await runtime.memory.browse(
        user_id=user, personality_id=p.id if p else None, offset=args.offset, limit=limit
    )
    if not page.total:
        print(f"No memories {_of(user, p)}.")
        return
    if not page.memories:
        print(f"No memories past the first {page.total} {_of(user, p)}.")
        return
    last = args.offset + len(page.memories)
    print(f"Memories {_of(user, p)}, newest first: {args.offset + 1} to {last} of {page.total}.")
    _print_memories(page.memories, await _short_ids(runtime, user, [m.id for m in page.memories]))
    if last < page.total:
        print(f"More: --offset {last}.")


async def cmd_memory_search(args: argparse.Namespace, runtime: Runtime) -> None:
    user, p = await _scope(runtime, args)
    ids = await runtime.memory.best_matches(
        user_id=user, query=args.query, personality_id=p.id if p else None, limit=_limit(args.limit, 50)
    )
    # Each memory's own words: a recall's best hit carries its neighbours' too (`personae recall`).
    found = await runtime.memory.browsed(user_id=user, ids=ids)
    if not found:
        print(f"No memories {_of(user, p)} match {args.query!r}.")
        return
    print(f"Memories {_of(user, p)} matching {args.query!r}, best first:")
    _print_memories(found, await _short_ids(runtime, user, [m.id for m in found]))


async def cmd_memory_show(args: argparse.Namespace, runtime: Runtime) -> None:
    from bot.whole_memory import memory_lines

    user, _ = await _scope(runtime, args)
    whole = await runtime.memory.whole(user_id=user, memory_id=await _memory_id(runtime, user, args.id))
    print("\n".join(memory_lines(whole)))


async def cmd_memory_forget(args: argparse.Namespace, runtime: Runtime) -> None:
    user, p = await _scope(runtime, args)
    memory = runtime.memory
    if args.id.strip().lower() != "all":
        memory_id = await _memory_id(runtime, user, args.id)
        if not await memory.forget(user_id=user, personality_id=p.id if p else None, memory_ids=[memory_id]):
            raise CommandError(f"User {user} has no memory with id {memory_id}")
        print("Forgotten. It will not come back in recall.")
        return
    stats = await memory.stats(personality_id=p.id if p else None, user_id=user)
    existing = stats.memories
    if not existing and not stats.pending_messages:  # pending: still forming, forgotten too (issue 33)
        print(f"No memories {_of(user, p)}.")
        return
    if not confirm(f"Delete all {existing} memories {_of(user, p)}? This cannot be undone.", yes=args.yes):
        print("Nothing deleted.")
        return
    count = await memory.forget(user_id=user, personality_id=p.id if p else None)
    print(f"Deleted {count} memories {_of(user, p)}.")


async def cmd_memory_pin(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.errors import NotFoundError

    user, _ = await _scope(runtime, args)
    memory_id = await _memory_id(runtime, user, args.id)
    try:
        await runtime.memory.set_pinned(user_id=user, memory_id=memory_id, pinned=not args.unpin)
    except NotFoundError:
        raise CommandError(f"User {user} has no memory with id {memory_id}") from None
    print("Unpinned." if args.unpin else "Pinned: recalled first whenever it is relevant.")


async def cmd_memory_correct(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.errors import NotFoundError

    user, _ = await _scope(runtime, args)
    memory_id = await _memory_id(runtime, user, args.id)
    try:
        await runtime.memory.correct(user_id=user, memory_id=memory_id, content=args.text)
    except NotFoundError:
        raise CommandError(f"User {user} has no memory with id {memory_id}") from None
    print("Corrected: recall now finds it by the new words; what was said is kept beside it.")


REASONS = {"pinned": "pinned", "rank": "#{rank}", "context": "around #{rank}"}


async def cmd_memory_used(args: argparse.Namespace, runtime: Runtime) -> None:
    user, _ = await _scope(runtime, args)
    message_id = check_id(str(args.message_id).strip(), "MESSAGE_ID")
    receipt = await runtime.memory.reply_receipt(user_id=user, message_id=message_id)
    await print_receipt(runtime, user, receipt)


async def print_receipt(runtime: Runtime, user: str, receipt: ReplyReceipt, reply: str = "") -> None:
    """The memories a reply used, a row each with its id, date and why it was chosen; `reply` names
    it (default: by the message it answered)."""
    reply = reply or f"The reply to message {receipt.answered_message_id}"
    gone = f" ({receipt.forgotten} forgotten since)" if receipt.forgotten else ""
    if not receipt.memories:
        print(f"{reply} used no long-term memories{gone}.")
        return
    count = len(receipt.memories)
    used = f"{count} memory" if count == 1 else f"{count} memories"
    print(f"{reply} used {used}{gone}:")
    short = await _short_ids(runtime, user, [m.id for m in receipt.memories])
    rows = [
        (
            short.get(m.id, str(m.id)),
            f"{m.occurred_at:%Y-%m-%d}",
            REASONS[m.reason].format(rank=m.rank),
            ("[pinned] " if m.pinned else "") + ("[superseded] " if m.superseded else "") + _line(m.content),
        )
        for m in receipt.memories
    ]
    print_table([_id_column(short), ("DATE", 10), ("WHY", 10), ("MEMORY", 0)], rows, empty="")


async def cmd_memory_fresh(args: argparse.Namespace, core: Core) -> None:
    user, p = await _scope(core, args)
    on = await core.user_settings.set_fresh(user, args.state == "on", p.id if p else None)
    scope = f"with {p.display_name}" if p else "with every personality"
    if on:
        print(
            f"Fresh mode is on for user {user} {scope}: replies use none of their memories "
            "(new ones still form, unless incognito is on)."
        )
    else:
        print(f"Fresh mode is off for user {user} {scope}: replies use their memories again.")


async def cmd_memory_export(args: argparse.Namespace, core: Core) -> None:
    user, p = await _scope(core, args)
    lines = await core.transfer.export_lines(user_id=user, personality_id=p.id if p else None)
    if not lines:
        print(f"No memories {_of(user, p)} to export.", file=sys.stderr)
        return
    text = "\n".join(lines) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"Cannot write {args.output}: {exc.strerror}") from None
    print(f"Wrote {len(lines)} lines to {args.output}; `personae import` reads them back.")
