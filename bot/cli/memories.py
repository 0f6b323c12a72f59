"""The memory commands: import transcripts, recall, storage report, reindex, re-summarize, the worker.

A user's own memories (`personae memory list|search|...`) are in user_memories.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli import memory_settings, user_memories
from bot.cli.output import CommandError, check_id, command_group, print_stats, progress, read_text_file
from bot.cli.personalities import MEMORY_MODES

IMPORT_FORMATS = ("jsonl", "sillytavern")

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Runtime
    from memory.errors import InvalidInputError
    from memory.service import RecalledMemory
    from memory.transfer.transcript import SkippedLine, TranscriptLine


PERSONALITY_HELP = "the personality (its name, as `personae personality list` shows it)"
# Skipped lines listed under an import's report; -v lists them all.
SKIPPED_SHOWN = 5


def add_commands(commands: Subcommands) -> None:
    imp = commands.add_parser(
        "import",
        help="import a chat transcript and form its memories",
        description="Import a transcript into the message log and form its memories. Importing the same "
        "file again adds only what is new.",
    )
    imp.add_argument(
        "file",
        type=Path,
        help="the transcript: Personae's JSONL (one message a line: id, role, content, ...; see README), "
        "or with --format sillytavern a chat .jsonl that SillyTavern saved",
    )
    imp.add_argument(
        "--format",
        choices=IMPORT_FORMATS,
        default="jsonl",
        help="jsonl: Personae's transcript (default); sillytavern: a SillyTavern chat .jsonl",
    )
    imp.add_argument(
        "--personality",
        help="the personality the chat was with (jsonl: else each line's own `personality`; sillytavern: "
        "else the chat's character)",
    )
    imp.add_argument(
        "--user", help="the user id of lines without a user_id (required for sillytavern: whose chat it is)"
    )
    imp.add_argument(
        "--memory-mode",
        choices=MEMORY_MODES,
        help="the memory mode for this import (default: each user's setting)",
    )
    # The old name, kept working and out of --help.
    imp.add_argument("--mode", dest="memory_mode", choices=MEMORY_MODES, help=argparse.SUPPRESS)
    imp.add_argument(
        "-v", "--verbose", dest="all_skipped", action="store_true", help="list every skipped line"
    )
    imp.set_defaults(
        handler=cmd_import,
        with_memory=True,
        embeds=True,
        # Issue 33: a stopped import says so and exits non-zero (a worker's SIGTERM is its normal end).
        when_stopped="import stopped: what was stored stays; run the same import again to add the rest",
    )

    recall = commands.add_parser(
        "recall",
        help="search a user's memories of a personality, as a reply would recall them",
        description="What the personality would recall for this user: the best memories first, the first "
        "with the exchanges said around it when they fit. With the user's fresh mode on, a reply recalls "
        "none: a line says so first.",
    )
    recall.add_argument("query", nargs="?", help="what to look for")
    recall.add_argument(
        "--queries-file", type=Path, help="a UTF-8 file, one query a line, answered in one run"
    )
    recall.add_argument("--personality", required=True, help=PERSONALITY_HELP)
    recall.add_argument("--user", required=True, help="whose memories (a user only ever sees their own)")
    recall.add_argument("--guild", help="recall as if in this guild (default: as in a DM)")
    recall.add_argument("--limit", type=int, default=5, help="memories per query, 1 to 100 (default 5)")
    recall.add_argument("--json", action="store_true", help="one JSON object per query (see README)")
    recall.set_defaults(handler=cmd_recall, with_memory=True, embeds=True)

    mcommands = command_group(commands, "memory", "long-term memories: storage report, a user's memories")
    stats = mcommands.add_parser(
        "stats",
        help="memories by mode and summarizer, storage saved, pending work",
        description="Memories by mode and summarizer with the characters they store, then the work "
        "still pending. Reads PostgreSQL only: runs while the bot holds the index.",
    )
    stats.add_argument("--personality", help=PERSONALITY_HELP + " (default: all)")
    stats.set_defaults(handler=cmd_memory_stats, index_when_used=True)
    user_memories.add_commands(mcommands)
    memory_settings.add_commands(mcommands)

    reindex = commands.add_parser(
        "reindex",
        help="rebuild the vector index from PostgreSQL (after changing EMBEDDING_MODEL)",
        description="Rebuild the vector index from PostgreSQL, the source of truth; --check only reports "
        "drift between the two.",
    )
    reindex.add_argument("--personality", help=PERSONALITY_HELP + " (default: all)")
    reindex.add_argument(
        "--check", action="store_true", help="only report drift between index and database (exit 1 if any)"
    )
    reindex.set_defaults(handler=cmd_reindex, with_memory=True, rebuilds_index=True)

    resum = commands.add_parser(
        "resummarize",
        help="re-summarize a personality's verbatim and extractive memories",
        description="Redo the personality's verbatim, cleaned and extractive memories with its summarizer "
        "(after turning summarization on, or once an LLM is configured).",
    )
    resum.add_argument("--personality", required=True, help=PERSONALITY_HELP)
    resum.set_defaults(handler=cmd_resummarize, with_memory=True)

    worker = commands.add_parser(
        "worker",
        help="form memories from the message log, continuously",
        description="Form memories from the message log until stopped (Ctrl-C): for deployments that run "
        "formation apart from the bot.",
    )
    worker.set_defaults(handler=cmd_worker, with_memory=True, long_running=True, serves_index=True)


def _read_import(args: argparse.Namespace) -> tuple[Iterable[TranscriptLine], list[SkippedLine], str | None]:
    """The file's lines, the lines skipped, and the personality they go to (None: a JSONL file's lines
    name their own). A JSONL file is read as it is imported: its skipped lines fill in as it is read."""
    from memory.errors import InvalidInputError
    from memory.owners.personality_fields import slugify
    from memory.transfer.sillytavern import parse_sillytavern
    from memory.transfer.transcript import open_transcript, read_transcript_text

    if args.format == "jsonl":
        transcript = open_transcript(args.file)
        return transcript, transcript.skipped, args.personality
    if args.user is None:
        raise CommandError("A SillyTavern chat names no user id: pass --user ID (whose history it is)")
    text = read_transcript_text(args.file)
    try:
        chat = parse_sillytavern(text)
    except InvalidInputError as exc:
        raise _with_format_hint(exc, text, args.format) from None
    name = args.personality or (slugify(chat.character_name) if chat.character_name else None)
    if not name:
        raise CommandError("The chat names no character: pass --personality NAME")
    return chat.lines, chat.skipped_lines, name


FORMAT_NAMES = {"jsonl": "Personae transcript", "sillytavern": "SillyTavern chat"}


def likely_format(text: str) -> str | None:
    """The import format the file's first record looks like: SillyTavern's messages carry `mes` (and
    its first line the chat's metadata), Personae's `role` and `content`; None when neither."""
    for raw in text.splitlines():
        if raw.strip():
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError):  # RecursionError: nested too deep (issue 33)
                return None
            if not isinstance(record, dict):
                return None
            if "mes" in record or {"user_name", "character_name", "chat_metadata"} & record.keys():
                return "sillytavern"
            if "role" in record and "content" in record:
                return "jsonl"
            return None
    return None


def _with_format_hint(exc: InvalidInputError, text: str, given: str) -> Exception:
    """The error, or with the --format that the file looks like when it is not the one given."""
    fits = likely_format(text)
    if fits is None or fits == given:
        return exc
    return CommandError(f"{exc}; this looks like a {FORMAT_NAMES[fits]}: pass --format {fits}")


def _first_line(path: Path) -> str:
    """The file's first line that is not blank (all that likely_format reads)."""
    from memory.transfer.transcript import transcript_file_lines

    return next((raw for _, raw in transcript_file_lines(path) if raw.strip()), "")


async def cmd_import(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.errors import InvalidInputError
    from memory.service import fallback_line
    from memory.types import MemoryMode

    user = check_id(args.user, "--user")
    lines, skipped, name = _read_import(args)
    personality = await runtime.personalities.find(name) if name is not None else None
    if personality is None and name is not None:
        if args.format == "sillytavern" and args.personality is None:
            raise CommandError(
                f"No personality named {name!r} (the chat's character): import its card first "
                "(`personae personality import CARD`) or pass --personality NAME"
            )
        personality = await runtime.personalities.get(name)  # its error says how to list them
    try:
        # A SillyTavern chat is the whole chat as its user keeps it: what changed there replaces.
        importing = (
            runtime.transfer.import_kept_chat
            if args.format == "sillytavern"
            else runtime.transfer.import_transcript
        )
        report = await importing(
            lines,
            personality=personality,
            default_user_id=user,
            skipped_lines=len(skipped),
            mode=MemoryMode(args.memory_mode) if args.memory_mode else None,
            progress=progress(f"Remembering {args.file.name}"),
        )
    except InvalidInputError as exc:  # a JSONL file's lines are checked as they are imported
        if args.format != "jsonl":
            raise
        raise _with_format_hint(exc, _first_line(args.file), args.format) from None
    f = report.formation
    print(f"messages read:   {report.messages_read} ({report.messages_new} new)")
    print(f"exchanges:       {report.exchanges}")
    print(f"memories stored: {f.memories} ({f.extractive} extractive, {f.fidelity_misses} carrying facts)")
    print(f"skipped lines:   {len(skipped)}")
    shown = skipped if args.all_skipped or args.verbose else skipped[:SKIPPED_SHOWN]
    for line in shown:
        print(f"  line {line.line_no}: {line.reason}")
    if len(skipped) > len(shown):
        print(f"  ... and {len(skipped) - len(shown)} more (-v lists them all)")
    if f.skipped:
        print(f"not remembered:  {f.skipped} exchanges (memory is off for their user or the personality)")
    if failed := fallback_line(f.fallbacks, f.memories, f.fallback_details):
        print(failed)
    # Known to this process only: said here, where the import asked the model.
    stats = await runtime.memory.stats(personality_id=personality.id if personality is not None else None)
    for pace in stats.one_exchange_lines():
        print(pace)


def recalled_json(query: str, memories: list[RecalledMemory]) -> str:
    """One query's answer as the JSON line `recall --json` prints.

    A hit's `content` and `source_message_ids` are what the chat prompt receives of it: its own words
    and messages first, then those of its context (the memories said just around it); `context`
    names those memories, so a reader can tell them apart.
    """
    return json.dumps(
        {
            "query": query,
            "memories": [
                {
                    "id": str(m.id),
                    "score": round(m.score, 6),
                    "content": m.text_with_context,
                    "content_verbatim": m.content_verbatim,
                    "source_message_ids": m.sources_with_context,
                    "occurred_at": m.occurred_at.isoformat(),
                    "context": [
                        {"id": str(c.id), "source_message_ids": c.source_message_ids} for c in m.context
                    ],
                }
                for m in memories
            ],
        },
        ensure_ascii=False,
    )


def _queries(args: argparse.Namespace) -> list[str]:
    if (args.query is None) == (args.queries_file is None):
        raise CommandError("Give a QUERY or --queries-file FILE (one query a line), not both")
    if args.queries_file is None:
        return [args.query]
    text = read_text_file(args.queries_file, "queries")
    return [q.strip() for q in text.splitlines() if q.strip()]


async def cmd_recall(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.conversations import storable_text

    queries = _queries(args)
    if args.limit < 1 or args.limit > 100:
        raise CommandError("The --limit must be between 1 and 100")
    user, guild = check_id(args.user, "--user"), check_id(args.guild, "--guild")
    personality = await runtime.personalities.get(args.personality)
    if await runtime.user_settings.is_fresh(user, personality.id):  # a reply would recall none of these
        print(
            f"(fresh mode is on for user {user} with {personality.display_name}: a reply recalls none of "
            f"these; `personae memory fresh off --user {user}` ends it)",
            file=sys.stderr if args.json else sys.stdout,  # --json's output stays JSON
        )
    # Arguments that are not UTF-8 come in as lone surrogates, which stdout cannot print back.
    for query in map(storable_text, queries):
        memories = await runtime.memory.recall(
            personality_id=personality.id, user_id=user, query=query, guild_id=guild, limit=args.limit
        )
        if args.json:
            print(recalled_json(query, memories))
            continue
        print(f"{query}")
        if not memories:
            print("  (no memories)")
        for rank, m in enumerate(memories, start=1):
            print(f"  {rank}. [{m.occurred_at:%Y-%m-%d}] {m.content}")
            print(f"     score {m.score:.3f}, from messages {', '.join(m.source_message_ids)}")
            for c in m.context:
                print(f"     context [{c.occurred_at:%Y-%m-%d}] {c.content}")


async def _personality_id(runtime: Runtime, name: str | None) -> int | None:
    return (await runtime.personalities.get(name)).id if name else None


async def cmd_memory_stats(args: argparse.Namespace, runtime: Runtime) -> None:
    print_stats(await runtime.memory.stats(personality_id=await _personality_id(runtime, args.personality)))


async def cmd_reindex(args: argparse.Namespace, runtime: Runtime) -> None:
    personality_id = await _personality_id(runtime, args.personality)
    memory = runtime.memory
    if args.check:
        drift = await memory.check_drift(personality_id=personality_id)
        print(f"memories in PostgreSQL: {drift.in_postgres}; points in index: {drift.in_index}")
        print(f"missing from index: {drift.missing_from_index}; stale in index: {drift.stale_in_index}")
        print(f"set aside (could not be indexed, see the log): {drift.set_aside}")
        print("drift found: run `personae reindex` to repair" if drift.drift else "no drift")
        if drift.drift:
            raise SystemExit(1)
        return
    total = (await memory.check_drift(personality_id=personality_id)).in_postgres
    count = await memory.reindex(personality_id=personality_id, progress=progress("Reindexing")(total))
    print(f"Reindexed {count} memories with {memory.embedding_model}.")


async def cmd_resummarize(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.service import fallback_line

    personality = await runtime.personalities.get(args.personality)
    memory = runtime.memory
    stats = await memory.stats(personality_id=personality.id)
    todo = sum(r.memories for r in stats.rows if r.summarizer in ("verbatim", "extractive"))
    report = await memory.resummarize(personality.id, progress=progress("Re-summarizing")(todo))
    print(
        f"Re-summarized {report.memories} of {report.exchanges} memories; "
        f"{report.extractive} left as they were, {report.fidelity_misses} carrying facts."
    )
    if failed := fallback_line(report.fallbacks, report.exchanges, report.fallback_details):
        print(failed)


async def cmd_worker(args: argparse.Namespace, runtime: Runtime) -> None:
    await runtime.memory.run_worker()
