"""The `personae` command line. Heavy imports happen inside commands so `--help` stays instant."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

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
    commands.add_parser("demo", help="create sample personalities and show them").set_defaults(
        handler=cmd_demo
    )
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


SAMPLE_PERSONALITIES = (
    ("Lilith", "verbatim", "You are Lilith, a sarcastic but warm librarian who loves old maps."),
    ("Sage", "summarized", "You are Sage, a calm gardener who remembers every friend's story."),
)


async def cmd_demo(args: argparse.Namespace, runtime: Runtime) -> None:
    for name, mode, prompt in SAMPLE_PERSONALITIES:
        _, created = await runtime.personalities.create(name, prompt=prompt, memory_mode=mode)
        print(f"{'Created' if created else 'Found'} sample personality {name} (memory {mode}).")
    print()
    await cmd_personality_list(args, runtime)


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

    async with open_runtime(settings) as runtime:
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
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else getattr(logging, settings.log_level),
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
