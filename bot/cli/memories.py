"""The memory commands: import transcripts, recall, storage report, reindex, re-summarize, the worker."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli.output import CommandError, command_group, print_stats, progress
from bot.cli.personalities import MEMORY_MODES

IMPORT_FORMATS = ("jsonl", "sillytavern")

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Runtime
    from memory.formation.importer import TranscriptLine
    from memory.recall.search import RecalledMemory


def add_commands(commands: Subcommands) -> None:
    imp = commands.add_parser("import", help="import a JSONL transcript and form its memories")
    imp.add_argument("file", type=Path, help="JSONL, one message a line: id, role, content, ...")
    imp.add_argument(
        "--format",
        choices=IMPORT_FORMATS,
        default="jsonl",
        help="jsonl: Personae's transcript (default); sillytavern: a SillyTavern chat .jsonl",
    )
    imp.add_argument(
        "--personality",
        help="personality the transcript was with (jsonl: else each line's own `personality`; "
        "sillytavern: else the chat's character)",
    )
    imp.add_argument("--user", help="user id for lines without a user_id (required for sillytavern)")
    imp.add_argument("--mode", choices=MEMORY_MODES, help="memory mode for this import (default: settings)")
    imp.set_defaults(handler=cmd_import, with_memory=True)

    recall = commands.add_parser("recall", help="search a user's memories of a personality")
    recall.add_argument("query", nargs="?", help="what to look for")
    recall.add_argument("--queries-file", type=Path, help="one query a line, answered in one process")
    recall.add_argument("--personality", required=True)
    recall.add_argument("--user", required=True, help="whose memories (a user only ever sees their own)")
    recall.add_argument("--guild", help="recall as if in this guild (default: as in a DM)")
    recall.add_argument("--limit", type=int, default=5, help="memories per query (default 5)")
    recall.add_argument("--json", action="store_true", help="one JSON object per query")
    recall.set_defaults(handler=cmd_recall, with_memory=True)

    mcommands = command_group(commands, "memory", "long-term memory reports")
    stats = mcommands.add_parser(
        "stats", help="memories by mode and summarizer, storage saving, pending work"
    )
    stats.add_argument("--personality")
    stats.set_defaults(handler=cmd_memory_stats, with_memory=True)

    reindex = commands.add_parser("reindex", help="rebuild the vector index from PostgreSQL")
    reindex.add_argument("--personality")
    reindex.add_argument("--check", action="store_true", help="only report drift between index and database")
    reindex.set_defaults(handler=cmd_reindex, with_memory=True, rebuilds_index=True)

    resum = commands.add_parser("resummarize", help="re-summarize verbatim and extractive memories")
    resum.add_argument("--personality", required=True)
    resum.set_defaults(handler=cmd_resummarize, with_memory=True)

    worker = commands.add_parser("worker", help="form memories from the message log, continuously")
    worker.set_defaults(handler=cmd_worker, with_memory=True, long_running=True)


def _read_import(args: argparse.Namespace) -> tuple[Iterable[TranscriptLine], int, str | None]:
    """The file's lines (a JSONL file's read as they are imported), how many were skipped so far, and
    the personality they go to (None: a JSONL file's lines name their own)."""
    from memory.formation.importer import open_transcript, read_transcript_text
    from memory.formation.sillytavern import parse_sillytavern
    from memory.owners.personality_fields import slugify

    if args.format == "jsonl":
        return open_transcript(args.file), 0, args.personality
    if args.user is None:
        raise CommandError("a SillyTavern chat names no user id: pass --user ID (whose history it is)")
    chat = parse_sillytavern(read_transcript_text(args.file))
    name = args.personality or (slugify(chat.character_name) if chat.character_name else None)
    if not name:
        raise CommandError("the chat names no character: pass --personality NAME")
    return chat.lines, chat.skipped, name


async def cmd_import(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.types import MemoryMode

    lines, skipped, name = _read_import(args)
    personality = await runtime.personalities.find(name) if name is not None else None
    if personality is None and name is not None:
        if args.format == "sillytavern" and args.personality is None:
            raise CommandError(
                f"no personality named {name!r} (the chat's character): import its card first "
                "(`personae personality import CARD`) or pass --personality NAME"
            )
        personality = await runtime.personalities.get(name)  # its error says how to list them
    report = await runtime.importer.import_lines(
        lines,
        personality_id=personality.id if personality is not None else None,
        personality_user_id=f"personality:{personality.name}" if personality is not None else None,
        default_user_id=args.user,
        skipped_lines=skipped,
        mode=MemoryMode(args.mode) if args.mode else None,
        progress=progress(f"Remembering {args.file.name}"),
    )
    f = report.formation
    print(f"messages read:   {report.messages_read} ({report.messages_new} new)")
    print(f"exchanges:       {report.exchanges}")
    print(
        f"memories stored: {f.memories} "
        f"({f.extractive} extractive, {f.fidelity_misses} kept verbatim for fidelity)"
    )
    print(f"skipped lines:   {report.skipped_lines + f.skipped}")


def recalled_json(query: str, memories: list[RecalledMemory]) -> str:
    """One query's answer as the JSON line `recall --json` prints."""
    return json.dumps(
        {
            "query": query,
            "memories": [
                {
                    "id": str(m.id),
                    "score": round(m.score, 6),
                    "content": m.content,
                    "content_verbatim": m.content_verbatim,
                    "source_message_ids": m.source_message_ids,
                    "occurred_at": m.occurred_at.isoformat(),
                }
                for m in memories
            ],
        },
        ensure_ascii=False,
    )


def _queries(args: argparse.Namespace) -> list[str]:
    if (args.query is None) == (args.queries_file is None):
        raise CommandError("give a QUERY or --queries-file FILE (one query a line), not both")
    if args.queries_file is None:
        return [args.query]
    try:
        text = args.queries_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {args.queries_file}: {exc.strerror}") from None
    return [q.strip() for q in text.splitlines() if q.strip()]


async def cmd_recall(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.conversations import storable_text

    queries = _queries(args)
    if args.limit < 1 or args.limit > 100:
        raise CommandError("--limit must be between 1 and 100")
    personality = await runtime.personalities.get(args.personality)
    # Arguments that are not UTF-8 come in as lone surrogates, which stdout cannot print back.
    for query in map(storable_text, queries):
        memories = await runtime.memory.recall(
            personality_id=personality.id,
            user_id=args.user,
            query=query,
            guild_id=args.guild,
            limit=args.limit,
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
        print("drift found: run `personae reindex` to repair" if drift.drift else "no drift")
        if drift.drift:
            raise SystemExit(1)
        return
    total = (await memory.check_drift(personality_id=personality_id)).in_postgres
    count = await memory.reindex(personality_id=personality_id, progress=progress("Reindexing")(total))
    print(f"Reindexed {count} memories with {memory.embedding_model}.")


async def cmd_resummarize(args: argparse.Namespace, runtime: Runtime) -> None:
    personality = await runtime.personalities.get(args.personality)
    memory = runtime.memory
    stats = await memory.stats(personality_id=personality.id)
    todo = sum(r.memories for r in stats.rows if r.summarizer in ("verbatim", "extractive"))
    report = await memory.resummarize(personality.id, progress=progress("Re-summarizing")(todo))
    print(
        f"Re-summarized {report.memories} of {report.exchanges} memories; "
        f"{report.extractive} left as they were (summarizer unavailable), "
        f"{report.fidelity_misses} kept verbatim for fidelity."
    )


async def cmd_worker(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.formation.worker import run_worker

    await run_worker(runtime.memory.formation)
