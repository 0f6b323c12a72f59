"""The `personae` command line. Heavy imports happen inside commands so `--help` stays instant."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.runtime import Runtime
    from memory.settings import Settings

MEMORY_MODES = ("verbatim", "summarized", "hybrid")
DISCORD_TOKEN_HELP = (
    "DISCORD_TOKEN is not set. Create a bot at https://discord.com/developers/applications "
    "(Bot -> Reset Token), enable the Message Content intent, then run: "
    "DISCORD_TOKEN=your-token personae run"
)


class CommandError(Exception):
    """A failure already phrased for the user; printed as one line, exit code 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="personae", description="Discord AI personalities with long-term memory."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    db = commands.add_parser("db", help="database schema").add_subparsers(dest="db_command", required=True)
    db.add_parser("upgrade", help="apply migrations up to the newest schema").set_defaults(
        handler=cmd_db_upgrade
    )

    personality = commands.add_parser("personality", help="create and inspect personalities")
    pcommands = personality.add_subparsers(dest="personality_command", required=True)
    create = pcommands.add_parser("create", help="create a personality (an existing one is left unchanged)")
    create.add_argument("name", help="the personality's name; its slug is used in commands")
    create.add_argument("--display-name", help="name shown in Discord (default: NAME)")
    create.add_argument("--prompt", help="system prompt (default: a short in-character prompt)")
    create.add_argument("--model", help="litellm chat model string, e.g. openai/gpt-4o-mini")
    create.add_argument(
        "--memory-mode", choices=MEMORY_MODES, default="verbatim", help="how memories are stored"
    )
    create.add_argument("--owner", help="owner's Discord user id")
    create.set_defaults(handler=cmd_personality_create)
    pcommands.add_parser("list", help="list personalities").set_defaults(handler=cmd_personality_list)
    show = pcommands.add_parser("show", help="show one personality")
    show.add_argument("name")
    show.set_defaults(handler=cmd_personality_show)

    commands.add_parser("run", help="start the Discord bot").set_defaults(handler=cmd_run)
    sync = commands.add_parser("sync-commands", help="publish the slash commands to Discord")
    sync.add_argument("--guild", type=int, help="sync to one guild only (shows up at once; good for testing)")
    sync.set_defaults(handler=cmd_sync_commands)

    llm = commands.add_parser("llm-config", help="named LLM endpoints (admin only; keys stay in env vars)")
    lcommands = llm.add_subparsers(dest="llm_config_command", required=True)
    ladd = lcommands.add_parser("add", help="add a named LLM config that owners can pick")
    ladd.add_argument("name", help="the name owners type, e.g. cheap-summarizer")
    ladd.add_argument("model", help="litellm model string, e.g. openai/gpt-4o-mini")
    ladd.add_argument("--api-base", help="endpoint URL, e.g. http://127.0.0.1:8000/v1")
    ladd.add_argument("--api-key-env", help="NAME of the environment variable holding the API key")
    ladd.add_argument("--temperature", type=float, default=0.7)
    ladd.add_argument("--max-tokens", type=int, default=512)
    ladd.add_argument("--timeout", type=float, default=60.0, help="seconds per call")
    ladd.add_argument("--context-window", type=int, help="input tokens the model accepts")
    ladd.set_defaults(handler=cmd_llm_config_add)
    lcommands.add_parser("list", help="list LLM configs").set_defaults(handler=cmd_llm_config_list)
    lremove = lcommands.add_parser("remove", help="remove an LLM config (users fall back to the default)")
    lremove.add_argument("name")
    lremove.set_defaults(handler=cmd_llm_config_remove)

    imp = commands.add_parser("import", help="import a JSONL transcript and form its memories")
    imp.add_argument("file", type=Path, help="JSONL, one message a line: id, role, content, ...")
    imp.add_argument("--personality", required=True, help="personality the transcript was with")
    imp.add_argument("--user", help="user id for lines without a user_id")
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

    memory = commands.add_parser("memory", help="long-term memory reports")
    mcommands = memory.add_subparsers(dest="memory_command", required=True)
    stats = mcommands.add_parser(
        "stats", help="memories by mode and summarizer, storage saving, pending work"
    )
    stats.add_argument("--personality")
    stats.set_defaults(handler=cmd_memory_stats, with_memory=True)

    reindex = commands.add_parser("reindex", help="rebuild the vector index from PostgreSQL")
    reindex.add_argument("--personality")
    reindex.add_argument("--check", action="store_true", help="only report drift between index and database")
    reindex.set_defaults(handler=cmd_reindex, with_memory=True)

    resum = commands.add_parser("resummarize", help="re-summarize verbatim and extractive memories")
    resum.add_argument("--personality", required=True)
    resum.set_defaults(handler=cmd_resummarize, with_memory=True)

    worker = commands.add_parser("worker", help="form memories from the message log, continuously")
    worker.set_defaults(handler=cmd_worker, with_memory=True)
    chat = commands.add_parser("chat", help="chat with a personality in the terminal")
    chat.add_argument("--personality", required=True, help="the personality's name")
    chat.add_argument("--user", default="terminal", help="your user id (default: terminal)")
    chat.add_argument("--name", default="You", help="the name the personality sees (default: You)")
    chat.add_argument(
        "--new", action="store_true", help="start a new conversation (clears its summary; memories stay)"
    )
    chat.set_defaults(handler=cmd_chat, with_memory=True)
    demo = commands.add_parser("demo", help="sample personalities, imported chats, storage and recalls")
    demo.set_defaults(handler=cmd_demo, with_memory=True)
    return parser


def _print_personality_row(name: str, display: str, mode: str, memory: bool, model: str | None) -> None:
    print(f"{name:<24} {display:<24} {mode:<11} {'on' if memory else 'off':<4} {model or '-'}")


async def cmd_db_upgrade(args: argparse.Namespace, runtime: Runtime) -> None:
    from models.migrate import current_revision

    print(f"Database schema at revision {await current_revision(runtime.engine)} (head).")


async def cmd_personality_create(args: argparse.Namespace, runtime: Runtime) -> None:
    personality, created = await runtime.personalities.create(
        args.name,
        display_name=args.display_name,
        prompt=args.prompt,
        model=args.model,
        memory_mode=args.memory_mode,
        owner_id=args.owner,
    )
    if created:
        p = personality
        print(f"Created personality {p.name!r} ({p.display_name}), memory {p.memory_mode}.")
    else:
        print(f"Personality {personality.name!r} already exists; left unchanged.")


async def cmd_personality_list(args: argparse.Namespace, runtime: Runtime) -> None:
    personalities = await runtime.personalities.list()
    if not personalities:
        print("No personalities yet. Create one: personae personality create NAME")
        return
    print(f"{'NAME':<24} {'DISPLAY NAME':<24} {'MODE':<11} {'MEM':<4} MODEL")
    for p in personalities:
        _print_personality_row(p.name, p.display_name, p.memory_mode, p.memory_enabled, p.chat_model)


async def cmd_personality_show(args: argparse.Namespace, runtime: Runtime) -> None:
    p = await runtime.personalities.get(args.name)
    print(f"name:             {p.name}")
    print(f"display name:     {p.display_name}")
    print(f"owner:            {p.owner_id or '-'}")
    print(f"chat model:       {p.chat_model or '(deployment default)'}")
    print(f"memory:           {'on' if p.memory_enabled else 'off'}, mode {p.memory_mode}")
    print(f"summarizer model: {p.summarizer_model or '(deployment default)'}")
    print(f"avatar:           {p.avatar_url or '-'}")
    print(f"created:          {p.created_at:%Y-%m-%d %H:%M} UTC")
    print("system prompt:")
    for line in p.system_prompt.splitlines() or [""]:
        print(f"  {line}")


def _progress(description: str) -> Callable[[int], Callable[[int], None]]:
    """A factory for tqdm bars on stderr: called with the total, returns the step function."""

    def start(total: int) -> Callable[[int], None]:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=description, unit="exchange", file=sys.stderr, leave=False)
        return bar.update

    return start


async def cmd_import(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.formation.importer import read_transcript
    from memory.types import MemoryMode

    lines, skipped = read_transcript(args.file)
    personality = await runtime.personalities.get(args.personality)
    assert runtime.importer is not None
    report = await runtime.importer.import_lines(
        lines,
        personality_id=personality.id,
        personality_user_id=f"personality:{personality.name}",
        default_user_id=args.user,
        skipped_lines=skipped,
        mode=MemoryMode(args.mode) if args.mode else None,
        progress=_progress(f"Remembering {args.file.name}"),
    )
    f = report.formation
    print(f"messages read:   {report.messages_read} ({report.messages_new} new)")
    print(f"exchanges:       {report.exchanges}")
    print(
        f"memories stored: {f.memories} "
        f"({f.extractive} extractive, {f.fidelity_misses} kept verbatim for fidelity)"
    )
    print(f"skipped lines:   {report.skipped_lines + f.skipped}")


def _recalled_json(query: str, memories: list[Any]) -> str:
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


async def cmd_recall(args: argparse.Namespace, runtime: Runtime) -> None:
    if (args.query is None) == (args.queries_file is None):
        raise CommandError("give a QUERY or --queries-file FILE (one query a line), not both")
    if args.limit < 1 or args.limit > 100:
        raise CommandError("--limit must be between 1 and 100")
    if args.queries_file is not None:
        try:
            queries = [
                q.strip() for q in args.queries_file.read_text(encoding="utf-8").splitlines() if q.strip()
            ]
        except OSError as exc:
            raise CommandError(f"cannot read {args.queries_file}: {exc.strerror}") from None
    else:
        queries = [args.query]
    personality = await runtime.personalities.get(args.personality)
    memory = runtime.require_memory()
    for query in queries:
        memories = await memory.recall(
            personality_id=personality.id,
            user_id=args.user,
            query=query,
            guild_id=args.guild,
            limit=args.limit,
        )
        if args.json:
            print(_recalled_json(query, memories))
            continue
        print(f"{query}")
        if not memories:
            print("  (no memories)")
        for rank, m in enumerate(memories, start=1):
            print(f"  {rank}. [{m.occurred_at:%Y-%m-%d}] {m.content}")
            print(f"     score {m.score:.3f}, from messages {', '.join(m.source_message_ids)}")


def _print_stats(stats: Any) -> None:
    print(
        f"{'MODE':<11} {'SUMMARIZER':<24} {'MEMORIES':>8} {'VERBATIM B':>11} {'STORED B':>10} "
        f"{'SAVING':>7} {'MISSES':>6}"
    )
    for row in stats.rows:
        saving = 100.0 * (1 - row.stored_bytes / row.source_bytes) if row.source_bytes else 0.0
        print(
            f"{row.mode:<11} {row.summarizer[:24]:<24} {row.memories:>8} {row.source_bytes:>11,} "
            f"{row.stored_bytes:>10,} {saving:>6.1f}% {row.fidelity_misses:>6}"
        )
    print(
        f"{'total':<36} {stats.memories:>8} {stats.source_bytes:>11,} {stats.stored_bytes:>10,} "
        f"{stats.saving_percent:>6.1f}%"
    )
    print(
        f"pending: {stats.pending_messages} messages not yet remembered, "
        f"{stats.unindexed_memories} memories not yet indexed"
    )


async def cmd_memory_stats(args: argparse.Namespace, runtime: Runtime) -> None:
    personality_id = (await runtime.personalities.get(args.personality)).id if args.personality else None
    _print_stats(await runtime.require_memory().stats(personality_id=personality_id))


async def cmd_reindex(args: argparse.Namespace, runtime: Runtime) -> None:
    personality_id = (await runtime.personalities.get(args.personality)).id if args.personality else None
    memory = runtime.require_memory()
    if args.check:
        drift = await memory.check_drift(personality_id=personality_id)
        print(f"memories in PostgreSQL: {drift.in_postgres}; points in index: {drift.in_index}")
        print(f"missing from index: {drift.missing_from_index}; stale in index: {drift.stale_in_index}")
        print("drift found: run `personae reindex` to repair" if drift.drift else "no drift")
        if drift.drift:
            raise SystemExit(1)
        return
    total = (await memory.check_drift(personality_id=personality_id)).in_postgres
    count = await memory.reindex(personality_id=personality_id, progress=_progress("Reindexing")(total))
    print(f"Reindexed {count} memories with {memory.embedding_model}.")


async def cmd_resummarize(args: argparse.Namespace, runtime: Runtime) -> None:
    personality = await runtime.personalities.get(args.personality)
    memory = runtime.require_memory()
    stats = await memory.stats(personality_id=personality.id)
    todo = sum(r.memories for r in stats.rows if r.summarizer in ("verbatim", "extractive"))
    report = await memory.resummarize(personality.id, progress=_progress("Re-summarizing")(todo))
    print(
        f"Re-summarized {report.memories} of {report.exchanges} memories; "
        f"{report.extractive} left as they were (summarizer unavailable), "
        f"{report.fidelity_misses} kept verbatim for fidelity."
    )


async def cmd_worker(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.formation.worker import run_worker

    await run_worker(runtime.require_memory())


async def cmd_chat(args: argparse.Namespace, runtime: Runtime) -> None:
    """A terminal conversation through the same ChatService as Discord: stored and remembered alike."""
    import uuid

    from memory.chat.service import NO_CHAT_MODEL, ChatRequest

    chat = runtime.chat
    assert chat is not None, "open_runtime(..., with_memory=True) builds the chat service"
    personality = await runtime.personalities.get(args.personality)
    if chat.chat_config(await chat.load_personality(personality.id)) is None:
        raise CommandError(NO_CHAT_MODEL)
    if getattr(args, "new", False):
        await chat.reset_conversation(
            personality_id=personality.id, guild_id=None, channel_id="terminal", user_id=args.user
        )
    print(f"Chatting with {personality.display_name}. /reset clears the summary; /quit or Ctrl-D ends.")
    background: asyncio.Task[Any] | None = None
    try:
        while True:
            line = await asyncio.to_thread(_read_line, "you> ")
            if line is None or line.strip() in ("/quit", "/exit"):
                break
            if not line.strip():
                continue
            if line.strip() == "/reset":
                removed = await chat.reset_conversation(
                    personality_id=personality.id, guild_id=None, channel_id="terminal", user_id=args.user
                )
                print(f"(conversation summary cleared: {removed} rows; long-term memories stay)")
                continue
            request = ChatRequest(
                personality_id=personality.id,
                user_id=args.user,
                user_name=args.name,
                guild_id=None,
                channel_id="terminal",
                message_id=f"terminal:{uuid.uuid4()}",
                text=line,
            )
            if background is not None:  # one formation pass at a time, in order
                await background
            prepared = await chat.prepare(request)
            print(f"{personality.display_name}> ", end="", flush=True)
            reply = await chat.generate(prepared, on_text=lambda piece: print(piece, end="", flush=True))
            print(reply.text if not reply.ok else "")
            if reply.ok:
                await chat.record_reply(reply, [(f"terminal:{uuid.uuid4()}", reply.text)])
                background = asyncio.create_task(chat.after_reply(prepared.conversation_id))
    finally:
        if background is not None:
            await background


def _read_line(prompt: str) -> str | None:
    """One line from the terminal (the prompt only when interactive); None at end of input."""
    if sys.stdin.isatty():
        try:
            return input(prompt)
        except EOFError:
            return None
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
SAMPLE_PERSONALITIES = (
    ("Lilith", "verbatim", "You are Lilith, a sarcastic but warm librarian who loves old maps."),
    ("Sage", "summarized", "You are Sage, a calm gardener who remembers every friend's story."),
)
DEMO_RECALLS = (
    ("sage", "1001", "How old is my grandmother?"),
    ("sage", "1001", "Plot #17"),
    ("sage", "1002", "what is my bonsai called"),
    ("lilith", "1002", "when is Turnip's birthday"),
)


async def cmd_demo(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.formation.importer import read_transcript

    examples = EXAMPLES_DIR
    assert runtime.importer is not None
    for name, mode, prompt in SAMPLE_PERSONALITIES:
        personality, created = await runtime.personalities.create(name, prompt=prompt, memory_mode=mode)
        print(f"{'Created' if created else 'Found'} personality {name} (memory {mode}).")
        lines, skipped = read_transcript(examples / f"{personality.name}.jsonl")
        report = await runtime.importer.import_lines(
            lines,
            personality_id=personality.id,
            personality_user_id=f"personality:{personality.name}",
            default_user_id=None,
            skipped_lines=skipped,
            progress=_progress(f"Remembering {name}'s chats"),
        )
        print(
            f"  imported {report.messages_new} new of {report.messages_read} messages, "
            f"{report.formation.memories} new memories"
        )
    memory = runtime.require_memory()
    for name, _, _ in SAMPLE_PERSONALITIES:
        personality = await runtime.personalities.get(name)
        print(f"\nStorage for {name} ({personality.memory_mode}):")
        _print_stats(await memory.stats(personality_id=personality.id))
    if runtime.settings.summarizer_model is None:
        print(
            "\nNo SUMMARIZER_MODEL is set, so Sage's summaries are extractive: sentences picked, not"
            "\nrewritten, and those that dropped a name, number or date keep their verbatim text too"
            "\n(MISSES), which is why they save little. Set SUMMARIZER_MODEL (e.g. ollama/llama3.1 or"
            "\nopenai/gpt-4o-mini), then"
            "\n`personae resummarize --personality sage`."
        )
    print("\nRecalls:")
    for name, user, query in DEMO_RECALLS:
        personality = await runtime.personalities.get(name)
        memories = await memory.recall(personality_id=personality.id, user_id=user, query=query, limit=2)
        print(f"  {name} / user {user}: {query!r}")
        for m in memories:
            excerpt = " / ".join(m.content.splitlines())
            print(f"    [{m.occurred_at:%Y-%m-%d}] {excerpt[:150]}{'...' if len(excerpt) > 150 else ''}")


async def cmd_llm_config_add(args: argparse.Namespace, runtime: Runtime) -> None:
    assert runtime.llm_configs is not None
    config = await runtime.llm_configs.add(
        args.name,
        model=args.model,
        api_base=args.api_base,
        api_key_env=args.api_key_env,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        context_window=args.context_window,
    )
    print(f"Added LLM config {config.name!r} ({config.model}).")


async def cmd_llm_config_list(args: argparse.Namespace, runtime: Runtime) -> None:
    assert runtime.llm_configs is not None
    configs = await runtime.llm_configs.list()
    if not configs:
        print("No LLM configs yet. Add one: personae llm-config add NAME MODEL [--api-base URL]")
        return
    print(f"{'NAME':<24} {'MODEL':<32} {'API BASE':<32} KEY ENV")
    for c in configs:
        print(f"{c.name:<24} {c.model:<32} {c.api_base or '-':<32} {c.api_key_env or '-'}")


async def cmd_llm_config_remove(args: argparse.Namespace, runtime: Runtime) -> None:
    assert runtime.llm_configs is not None
    await runtime.llm_configs.remove(args.name)
    print(f"Removed LLM config {args.name!r}.")


async def cmd_sync_commands(args: argparse.Namespace, runtime: Runtime) -> None:
    import discord

    from bot.client import PersonaeBot, sync_command_tree

    token = runtime.settings.discord_token
    if token is None or not token.get_secret_value().strip():
        raise CommandError(DISCORD_TOKEN_HELP)
    async with PersonaeBot(runtime=runtime) as bot:
        try:
            await bot.login(token.get_secret_value())  # HTTP only; loads the cogs, no gateway
        except discord.LoginFailure:
            raise CommandError("Discord rejected DISCORD_TOKEN; reset it in the developer portal.") from None
        names = await sync_command_tree(bot, args.guild)
    where = (
        f"guild {args.guild}" if args.guild else "every guild (global commands may take a while to appear)"
    )
    print(f"Synced {len(names)} commands to {where}: {', '.join('/' + n for n in names)}")


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    if settings.discord_token is None or not settings.discord_token.get_secret_value().strip():
        raise CommandError(DISCORD_TOKEN_HELP)
    from bot.__main__ import run_bot

    return run_bot(settings)


async def _with_runtime(
    handler: Callable[[argparse.Namespace, Runtime], Awaitable[None]],
    args: argparse.Namespace,
    settings: Settings,
) -> None:
    from bot.runtime import open_runtime

    async with open_runtime(settings, with_memory=getattr(args, "with_memory", False)) as runtime:
        await handler(args, runtime)


def _explain_connection_error(exc: BaseException, settings: Settings) -> str | None:
    """One line for the database being unreachable, instead of a driver traceback."""
    if isinstance(exc, OSError | ConnectionError) or type(exc).__module__.startswith("asyncpg"):
        where = "DATABASE_URL" if settings.database_url else "the embedded PostgreSQL"
        return f"Cannot reach {where}: {exc}. Check that the server is running and the URL is right."
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from memory.errors import UserFacingError
    from memory.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"personae: {exc}", file=sys.stderr)
        return 2
    # Long-running services log at LOG_LEVEL; one-shot commands show only problems and their output.
    service = args.handler in (cmd_run, cmd_worker)
    level = (
        getattr(logging, settings.log_level)
        if service
        else max(logging.WARNING, getattr(logging, settings.log_level))
    )
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        # Library chatter (pgserver's start-up, httpx requests) is noise on a CLI.
        for noisy in ("pgserver", "httpx", "LiteLLM", "litellm", "alembic"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        if args.handler is cmd_run:
            return cmd_run(args, settings)
        asyncio.run(_with_runtime(args.handler, args, settings))
    except (CommandError, UserFacingError) as exc:
        print(f"personae: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        explained = _explain_connection_error(exc, settings)
        if explained is None:
            raise
        print(f"personae: {explained}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
