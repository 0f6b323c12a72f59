"""`personae recall` and `personae memory ...` typed inside a terminal chat (`/recall QUERY`, `/memory
ARGS`): the same commands, parsed by the same parser and run by the same handlers, on the chat's own
runtime, whose vector index the chat holds (a second process would find it busy), for the chat's user."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING

from bot.cli.output import CommandError

if TYPE_CHECKING:
    from bot.runtime import Runtime


def _takes_user(parser: argparse.ArgumentParser, words: list[str]) -> bool:
    """Whether the command `words` names (its leading subcommand names) has a --user option."""
    for word in words:
        choices = next(
            (a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None
        )
        if not choices or word not in choices:
            break
        parser = choices[word]
    return any("--user" in action.option_strings for action in parser._actions)


def split_words(rest: str) -> list[str] | None:
    """What was typed after the chat's command, split as a shell would; None (said) when it cannot be."""
    try:
        return shlex.split(rest)
    except ValueError as exc:  # an unclosed quote
        print(f"({exc})")
        return None


async def run_in_chat(runtime: Runtime, user_id: str, words: list[str]) -> None:
    """`personae WORDS` for the chat's user (its --user added where the command takes one); a usage
    error or a refusal is said in one line, and the chat goes on."""
    from bot.cli import memories
    from memory.errors import UserFacingError

    # The recall and memory commands' own parser (bot.cli.app's whole tree would import this chat).
    parser = argparse.ArgumentParser(prog="personae")
    memories.add_commands(parser.add_subparsers(dest="command", required=True))
    if "--user" not in words and _takes_user(parser, words):
        words += ["--user", user_id]
    try:
        args = parser.parse_args(words)
    except SystemExit:  # argparse has printed the usage and the error
        return
    if getattr(args, "handler", None) is None:
        print("(that command does not run inside the chat: run it in another terminal)")
        return
    try:
        await args.handler(args, runtime)
    except (CommandError, UserFacingError) as exc:
        print(f"({exc})")
    sys.stdout.flush()
