"""`personae personality`: create and inspect personalities, import and export character cards."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.cli import lore
from bot.cli.output import CommandError, add_options, command_group, option_values

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Core

MEMORY_MODES = ("verbatim", "summarized", "hybrid")


# `personality create`'s options passed on to PersonalityService.create under their keyword names.
CREATE_OPTIONS: dict[str, dict[str, Any]] = {
    "display_name": {"help": "name shown in Discord (default: NAME)"},
    "prompt": {"help": "system prompt (default: a short in-character prompt)"},
    "model": {"help": "litellm chat model string, e.g. openai/gpt-4o-mini"},
    "memory_mode": {"choices": MEMORY_MODES, "default": "verbatim", "help": "how memories are stored"},
}


def add_commands(commands: Subcommands) -> None:
    pcommands = command_group(commands, "personality", "create and inspect personalities")
    create = pcommands.add_parser("create", help="create a personality (an existing one is left unchanged)")
    create.add_argument("name", help="the personality's name; its slug is used in commands")
    add_options(create, CREATE_OPTIONS)
    create.add_argument("--owner", help="owner's Discord user id")
    create.set_defaults(handler=cmd_personality_create)
    pcommands.add_parser("list", help="list personalities").set_defaults(handler=cmd_personality_list)
    show = pcommands.add_parser("show", help="show one personality")
    show.add_argument("name")
    show.set_defaults(handler=cmd_personality_show)
    card_import = pcommands.add_parser(
        "import", help="create a personality from a character card (V2 or V3, JSON or PNG)"
    )
    card_import.add_argument("file", type=Path, help="the card: .json, or .png with the card embedded")
    card_import.add_argument("--name", help="the personality's name (default: the card's name)")
    card_import.add_argument("--owner", help="owner's Discord user id")
    card_import.set_defaults(handler=cmd_personality_import)
    export = pcommands.add_parser(
        "export", help="write a personality as a character card (V3 if it came as V3, else V2)"
    )
    export.add_argument("name")
    export.add_argument(
        "-o", "--output", type=Path, help="file to write: .json, or .png (default: JSON on standard output)"
    )
    export.add_argument("--image", type=Path, help="with -o FILE.png: the picture to put the card in")
    export.set_defaults(handler=cmd_personality_export)
    lore.add_commands(pcommands)


async def cmd_personality_create(args: argparse.Namespace, core: Core) -> None:
    personality, created = await core.personalities.create(
        args.name, owner_id=args.owner, **option_values(args, CREATE_OPTIONS)
    )
    if created:
        p = personality
        print(f"Created personality {p.name!r} ({p.display_name}), memory {p.memory_mode}.")
    else:
        print(f"Personality {personality.name!r} already exists; left unchanged.")


async def cmd_personality_list(args: argparse.Namespace, core: Core) -> None:
    personalities = await core.personalities.list()
    if not personalities:
        print("No personalities yet. Create one: personae personality create NAME")
        return
    print(f"{'NAME':<24} {'DISPLAY NAME':<24} {'MODE':<11} {'MEM':<4} MODEL")
    for p in personalities:
        memory = "on" if p.memory_enabled else "off"
        print(f"{p.name:<24} {p.display_name:<24} {p.memory_mode:<11} {memory:<4} {p.chat_model or '-'}")


async def cmd_personality_show(args: argparse.Namespace, core: Core) -> None:
    p = await core.personalities.get(args.name)
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


async def cmd_personality_import(args: argparse.Namespace, core: Core) -> None:
    from memory.owners.cards import create_from_card, read_card_file

    card = read_card_file(args.file)
    # No host for the card's picture here: the card's own https avatar URL, if it names one.
    imported = await create_from_card(
        core.personalities,
        card,
        name=args.name,
        owner_id=args.owner,
        by_operator=True,
        avatar_url=card.avatar_url,
    )
    p = imported.personality
    print(f"Imported {card.version} card {p.display_name!r} as personality {p.name!r}.")
    print(f"prompt:   {len(p.system_prompt):,} characters")
    for line in imported.report.lines():
        print(line)
    print(f"avatar:   {p.avatar_url or '-'}")


async def cmd_personality_export(args: argparse.Namespace, core: Core) -> None:
    from memory.owners.cards import export_card, export_png

    personality = await core.personalities.get(args.name)
    as_png = args.output is not None and args.output.suffix.lower() == ".png"
    if args.image is not None and not as_png:
        raise CommandError("--image puts the card in a picture: give -o FILE.png too")
    if not as_png:
        text = json.dumps(export_card(personality), ensure_ascii=False, indent=2) + "\n"
        if args.output is None:
            print(text, end="")
            return
        data = text.encode("utf-8")
    else:
        try:
            picture = args.image.read_bytes() if args.image is not None else None
        except OSError as exc:
            raise CommandError(f"cannot read {args.image}: {exc.strerror}") from None
        data = export_png(personality, picture)
    try:
        args.output.write_bytes(data)
    except OSError as exc:
        raise CommandError(f"cannot write {args.output}: {exc.strerror}") from None
    print(f"Wrote {args.output}.")
