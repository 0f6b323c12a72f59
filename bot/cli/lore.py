"""`personae personality lore NAME list|add|edit|enable|disable`: a personality's lorebook entries,
through the same service as `/personality lore` (memory.owners.lore_editing.LoreService)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from bot.cli.output import add_options, print_table

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Core
    from memory.owners.lore import LoreEntry
    from memory.owners.lore_editing import LoreChanges

POSITIONS = ("before", "after", "depth")
LOGICS = ("and-any", "and-all", "not-any", "not-all")
TEXT_SHOWN = 60

# The options of `add` and `edit`, by the name of the LoreChanges field each sets.
ENTRY_OPTIONS: dict[str, dict[str, Any]] = {
    "keys": {"metavar": "KEYS", "help": "words that activate the entry, comma-separated (/regex/i allowed)"},
    "secondary_keys": {"metavar": "KEYS", "help": "with --logic: words that must (or must not) come up too"},
    "logic": {"choices": LOGICS, "help": "how secondary keys combine with the keys (default and-any)"},
    "constant": {"action": argparse.BooleanOptionalAction, "help": "always active, whatever is said"},
    "position": {"choices": POSITIONS, "help": "before or after the character's definition, or at a --depth"},
    "depth": {"type": int, "help": "with --position depth: messages from the end of the history (0: last)"},
    "order": {
        "type": int,
        "help": "insertion order: lower comes first; higher is kept first when space is short",
    },
    "priority": {"type": int, "help": "kept before entries of lower priority when space is short"},
    "case_sensitive": {"action": argparse.BooleanOptionalAction, "help": "keys match only in their case"},
    "regex": {"action": argparse.BooleanOptionalAction, "help": "the keys are regular expressions"},
    "comment": {"help": "a name for the entry in lists (never shown to the model)"},
}


def add_commands(personality_commands: Subcommands) -> None:
    lore = personality_commands.add_parser(
        "lore", help="list, add, edit, enable and disable lorebook entries"
    )
    lore.add_argument("name", metavar="NAME", help="the personality")
    commands = lore.add_subparsers(dest="lore_command", required=True)
    commands.add_parser("list", help="the personality's lore entries, by number").set_defaults(
        handler=cmd_lore_list
    )
    add = commands.add_parser("add", help="add an entry (a personality without a card gets a lorebook)")
    _entry_options(add)
    add.set_defaults(handler=cmd_lore_add)
    edit = commands.add_parser("edit", help="change an entry: only the options given")
    edit.add_argument("number", type=int, help="the entry's number in `lore NAME list`")
    _entry_options(edit)
    edit.set_defaults(handler=cmd_lore_edit)
    for verb, enabled in (("enable", True), ("disable", False)):
        switch = commands.add_parser(verb, help=f"{verb} an entry (a disabled one never reaches the prompt)")
        switch.add_argument("number", type=int, help="the entry's number in `lore NAME list`")
        switch.set_defaults(handler=cmd_lore_switch, enabled=enabled)


def _entry_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--text", dest="content", metavar="TEXT", help="what the model is told while the entry is active"
    )
    add_options(parser, ENTRY_OPTIONS)


def _changes(args: argparse.Namespace) -> LoreChanges:
    from memory.owners.lore_editing import typed_changes

    return typed_changes(
        keys=args.keys,
        content=args.content,
        secondary_keys=args.secondary_keys,
        logic=args.logic,
        constant=args.constant,
        position=args.position,
        depth=args.depth,
        order=args.order,
        priority=args.priority,
        case_sensitive=args.case_sensitive,
        use_regex=args.regex,
        comment=args.comment,
    )


def _shown(entry: LoreEntry) -> str:
    """The entry's name and the start of its text, on one line."""
    text = f"{entry.comment}: {entry.content}" if entry.comment else entry.content
    return " ".join(text.split())[:TEXT_SHOWN]


async def cmd_lore_list(args: argparse.Namespace, core: Core) -> None:
    book = await core.lore.book(args.name, actor=None)
    rows = [
        [
            str(e.number),
            "on" if e.enabled else "off",
            e.activation[:40],
            e.placement,
            f"{e.insertion_order:g}",
            _shown(e),
        ]
        for e in book.entries
    ]
    print_table(
        [("#", 4), ("ON", 4), ("KEYS", 40), ("WHERE", 8), ("ORDER", 6), ("ENTRY", 0)],
        rows,
        empty=f"No lore yet. Add an entry: personae personality lore {args.name} add --keys KEYS --text TEXT",
    )


async def cmd_lore_add(args: argparse.Namespace, core: Core) -> None:
    entry = await core.lore.add(args.name, _changes(args), actor=None)
    print(f"Added lore entry {entry.number} ({entry.activation}, {entry.placement}).")


async def cmd_lore_edit(args: argparse.Namespace, core: Core) -> None:
    entry = await core.lore.edit(args.name, args.number, _changes(args), actor=None)
    print(f"Changed lore entry {entry.number} ({entry.activation}, {entry.placement}).")


async def cmd_lore_switch(args: argparse.Namespace, core: Core) -> None:
    entry = await core.lore.set_enabled(args.name, args.number, enabled=args.enabled, actor=None)
    print(f"Lore entry {entry.number} ({entry.label}) is {'enabled' if entry.enabled else 'disabled'}.")
