"""The CLI does what the slash commands do: the bot's published command tree and `personae`'s argument
tree are walked, and every verb of one must be in the other, or be a listed exception with its reason."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from discord import app_commands

from bot.cli.app import build_parser
from testkit.fake_discord import TOKEN, FakeDiscord

# A slash command whose CLI verb has another name or is an option of a wider verb: (CLI verb, option).
RENAMED: dict[str, tuple[str, str | None]] = {
    "memory browse": ("memory list", None),
    "personality info": ("personality show", None),
    "personality edit": ("personality set", None),
    "personality memory": ("personality set", "--memory-mode"),
    "personality summarizer-model": ("personality set", "--summarizer-model"),
    "personality summarizer-prompt": ("personality set", "--summarizer-prompt"),
    "personality resummarize": ("resummarize", None),
    "Forget this": ("memory forget", None),
}
# Slash commands with no CLI verb, each with its reason.
DISCORD_ONLY = {
    "personality activate": "binds a Discord channel to a personality; the terminal chat needs no binding",
    "personality deactivate": "unbinds a Discord channel (see activate)",
    "Remember this": "acts on a Discord message before its memory forms; `memory pin ID` pins one formed",
}
# CLI verbs with no slash command, each with its reason.
CLI_ONLY = {
    "db upgrade": "the operator's schema migration",
    "db status": "the operator's view of the database",
    "db stop": "stops the embedded PostgreSQL of this machine",
    "run": "starts the bot itself",
    "sync-commands": "publishes the slash commands (an owner action, not a command in Discord)",
    "llm-config add": "LLM endpoints and keys are the operator's, never typed into Discord",
    "llm-config list": "see llm-config add",
    "llm-config remove": "see llm-config add",
    "import": "transcripts from files on the operator's machine",
    "recall": "what a reply would recall, for the operator (a user sees their memories via /memory browse)",
    "reindex": "rebuilds the operator's vector index",
    "worker": "a process that forms memories apart from the bot",
    "chat": "the terminal's own conversation (on Discord, one talks in a channel)",
    "demo": "sample personalities for a first look at the terminal",
    "memory stats": "the storage report across users; a user's own is in /memory status",
    "memory pin": "a button of /memory browse's view",
    "memory correct": "the edit button of /memory browse's view",
    "memory used": "the 🧠 button under a reply",
    "personality lore": "the lore group takes its personality as an argument (NAME) before the verb",
}


def slash_verbs(tree: app_commands.CommandTree) -> Iterator[str]:
    """Every command of the tree by its full name (`memory status`, `personality lore add`), menus by name."""

    def walk(
        command: app_commands.Command[Any, ..., Any] | app_commands.Group | app_commands.ContextMenu,
    ) -> Iterator[str]:
        if isinstance(command, app_commands.Group):
            for child in command.commands:
                yield from walk(child)
        elif isinstance(command, app_commands.ContextMenu):
            yield command.name
        else:
            yield command.qualified_name

    for command in tree.get_commands():
        yield from walk(command)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


Verb = tuple[str, argparse.ArgumentParser]


def cli_verbs(parser: argparse.ArgumentParser, path: str = "") -> Iterator[Verb]:
    """Every command that runs something (a leaf of the tree), by its full name, with its parser."""
    children = subcommands(parser)
    if path and (not children or path == "personality lore"):
        yield path, parser
    for name, child in children.items():
        yield from cli_verbs(child, f"{path} {name}".strip())


async def test_every_slash_command_has_its_cli_verb_and_back(discord_world: FakeDiscord) -> None:
    from bot.client import CommandPublisher

    async with CommandPublisher() as client:
        await client.login(TOKEN)  # loads the slash-command extensions, as `personae sync-commands` does
        slash = set(slash_verbs(client.tree))
    cli = dict(cli_verbs(build_parser()))
    # `personality lore NAME add`: the lore verbs sit under the personality's name.
    lore = subcommands(subcommands(subcommands(build_parser())["personality"])["lore"])
    cli.update({f"personality lore {name}": sub for name, sub in lore.items()})

    missing, covered = [], set()
    for verb in sorted(slash):
        if verb in DISCORD_ONLY:
            continue
        target, option = RENAMED.get(verb, (verb, None))
        if target not in cli:
            missing.append(f"/{verb}: no `personae {target}`")
            continue
        covered.add(target)
        if option is not None:
            options = {o for action in cli[target]._actions for o in action.option_strings}
            assert option in options, f"/{verb}: `personae {target}` has no {option}"
    assert not missing, missing
    uncovered = sorted(set(cli) - covered - set(CLI_ONLY))
    assert not uncovered, f"CLI verbs with no slash command and no reason given: {uncovered}"
    # Every exception names a verb that exists, so a list gone stale fails too.
    assert set(DISCORD_ONLY) <= slash and set(RENAMED) <= slash
    assert set(CLI_ONLY) <= set(cli) and not set(CLI_ONLY) & covered


def test_the_memory_mode_is_one_option_name_everywhere() -> None:
    """`--memory-mode` wherever a memory mode is chosen; `import --mode` still works, out of --help."""
    chooses_mode = {
        verb: {o for action in parser._actions for o in action.option_strings}
        for verb, parser in cli_verbs(build_parser())
        if any(action.dest == "memory_mode" for action in parser._actions)
    }
    assert {"import", "personality create", "personality set", "personality import"} <= set(chooses_mode)
    assert all("--memory-mode" in options for options in chooses_mode.values()), chooses_mode
    old = build_parser().parse_args(["import", "chat.jsonl", "--mode", "hybrid"])
    assert old.memory_mode == "hybrid"
    assert "--mode " not in build_parser()._subparsers._group_actions[0].choices["import"].format_help()  # type: ignore[union-attr, index]
