"""`personae personality`: create, change, delete and inspect personalities; character cards in and out.

What the slash commands /personality create, edit, memory, summarizer-model, summarizer-prompt and
delete do, with the same checks (PersonalityService), for the operator at the terminal.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.cli import lore
from bot.cli.output import CommandError, command_group, confirm, read_text_file

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Core, Runtime
    from memory.owners.personality_fields import ModelChoice

MEMORY_MODES = ("verbatim", "summarized", "hybrid")
MEMORY_MODE_HELP = (
    "how new memories are stored: verbatim (the exchange word for word), summarized (a condensed "
    "summary, smaller; facts it drops are kept beside it) or hybrid (the summary is what recall "
    "searches, the exchange word for word is kept with it)"
)
MODEL_HELP = "a litellm model string, e.g. openai/gpt-4o-mini ('default': the deployment's CHAT_MODEL)"
LLM_CONFIG_HELP = "an LLM config by name (`personae llm-config list`), for its own endpoint and key"


def add_commands(commands: Subcommands) -> None:
    pcommands = command_group(
        commands, "personality", "create, change, delete and inspect personalities; character cards"
    )
    create = pcommands.add_parser(
        "create",
        help="create a personality (an existing one is left unchanged)",
        description="Create a personality. One of that name already existing is left unchanged (exit 0).",
    )
    create.add_argument("name", help="its name (letters, digits, dashes make the name used in commands)")
    create.add_argument("--display-name", help="the name its replies are posted under (default: NAME)")
    create.add_argument("--prompt", help="its system prompt (default: a short in-character prompt)")
    _model_options(create)
    _memory_mode_option(create)
    create.add_argument("--owner", help="the Discord user id of its owner, who may change it in Discord")
    create.set_defaults(handler=cmd_personality_create)

    pcommands.add_parser("list", help="list personalities").set_defaults(handler=cmd_personality_list)
    show = pcommands.add_parser("show", help="show a personality's settings and system prompt")
    show.add_argument("name", help="the personality")
    show.set_defaults(handler=cmd_personality_show)

    change = pcommands.add_parser(
        "set",
        help="change a personality: names, prompt, models, memory",
        description="Change what is given; everything else stays as it is.",
    )
    change.add_argument("name", help="the personality to change")
    change.add_argument("--display-name", help="the name its replies are posted under")
    prompt = change.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="its new system prompt")
    prompt.add_argument("--prompt-file", type=Path, help="a UTF-8 text file holding its new system prompt")
    _model_options(change)
    change.add_argument("--memory", choices=("on", "off"), help="off: nothing said to it becomes a memory")
    change.add_argument("--memory-mode", choices=MEMORY_MODES, help=MEMORY_MODE_HELP)
    summarizer = change.add_mutually_exclusive_group()
    summarizer.add_argument(
        "--summarizer-model",
        help="the model that summarizes its memories: a litellm model string ('default': SUMMARIZER_MODEL)",
    )
    summarizer.add_argument("--summarizer-llm-config", help="the summarizer as an LLM config, by name")
    summarizer_prompt = change.add_mutually_exclusive_group()
    summarizer_prompt.add_argument(
        "--summarizer-prompt", help="its own summarizer prompt ('' goes back to the default one)"
    )
    summarizer_prompt.add_argument(
        "--summarizer-prompt-file", type=Path, help="a UTF-8 text file holding its summarizer prompt"
    )
    change.add_argument("--avatar", help="an https:// image URL for its avatar ('none' removes it)")
    change.set_defaults(handler=cmd_personality_set)

    delete = pcommands.add_parser(
        "delete",
        help="delete a personality with all its memories and conversations",
        description="Delete a personality, its conversations and its memories. Asks first, unless --yes.",
    )
    delete.add_argument("name", help="the personality to delete")
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    # Its memories' points leave the index too: this needs the index.
    delete.set_defaults(handler=cmd_personality_delete, with_memory=True)

    card_import = pcommands.add_parser(
        "import",
        help="create a personality from a character card (V1, V2 or V3; JSON or PNG)",
        description="Create a personality from a character card (V1, V2 or V3; JSON or PNG); the card's "
        "name is its name unless --name.",
    )
    card_import.add_argument(
        "file", type=Path, help="the card, V1, V2 or V3: .json, or .png with the card embedded"
    )
    card_import.add_argument("--name", help="the personality's name (default: the card's name)")
    card_import.add_argument(
        "--display-name", help="the name its replies are posted under (default: the card's)"
    )
    card_import.add_argument("--owner", help="the Discord user id of its owner")
    _memory_mode_option(card_import)
    card_import.set_defaults(handler=cmd_personality_import)
    export = pcommands.add_parser(
        "export", help="write a personality as a character card (V3 if it came as V3, else V2)"
    )
    export.add_argument("name", help="the personality")
    export.add_argument(
        "-o", "--output", type=Path, help="file to write: .json, or .png (default: JSON on standard output)"
    )
    export.add_argument(
        "--image",
        type=Path,
        help="with -o FILE.png: the picture to put the card in (default: the picture its card came "
        "in, else a plain one)",
    )
    export.set_defaults(handler=cmd_personality_export)
    lore.add_commands(pcommands)


def _memory_mode_option(parser: argparse.ArgumentParser) -> None:
    help = f"{MEMORY_MODE_HELP} (default verbatim)"
    parser.add_argument("--memory-mode", choices=MEMORY_MODES, default="verbatim", help=help)


def _model_options(parser: argparse.ArgumentParser) -> None:
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--model", help="its chat model: " + MODEL_HELP)
    model.add_argument("--llm-config", help="its chat model as " + LLM_CONFIG_HELP)


async def _chat_model(core: Core, args: argparse.Namespace) -> ModelChoice | None:
    return await core.personalities.choose_model(model=args.model, llm_config=args.llm_config)


async def cmd_personality_create(args: argparse.Namespace, core: Core) -> None:
    choice = await _chat_model(core, args)
    personality, created = await core.personalities.create(
        args.name,
        display_name=args.display_name,
        prompt=args.prompt,
        model=choice.model if choice else None,
        llm_config_id=choice.llm_config_id if choice else None,
        memory_mode=args.memory_mode,
        owner_id=args.owner,
    )
    if created:
        p = personality
        print(f"Created personality {p.name!r} ({p.display_name}), memory {p.memory_mode}.")
    else:
        name = personality.name
        print(f"Personality {name!r} already exists; left unchanged (`personae personality set` changes it).")


async def cmd_personality_list(args: argparse.Namespace, core: Core) -> None:
    personalities = await core.personalities.list()
    if not personalities:
        print("No personalities yet. Create one: personae personality create NAME")
        return
    print(f"{'NAME':<24} {'DISPLAY NAME':<24} {'MODE':<11} {'MEM':<4} MODEL")
    for p in personalities:
        memory = "on" if p.memory_enabled else "off"
        print(f"{p.name:<24} {p.display_name:<24} {p.memory_mode:<11} {memory:<4} {p.chat_model or '-'}")


def _model_line(config: Any, model: str | None) -> str:
    if config is not None:
        return f"LLM config {config.name} ({config.model})"
    return model or "(deployment default)"


async def cmd_personality_show(args: argparse.Namespace, core: Core) -> None:
    # get() first: its error names the command that lists them.
    p = await core.personalities.get_detailed((await core.personalities.get(args.name)).name)
    print(f"name:              {p.name}")
    print(f"display name:      {p.display_name}")
    print(f"owner:             {p.owner_id or '-'}")
    print(f"chat model:        {_model_line(p.chat_llm_config, p.chat_model)}")
    print(f"memory:            {'on' if p.memory_enabled else 'off'}, mode {p.memory_mode}")
    print(f"summarizer model:  {_model_line(p.summarizer_llm_config, p.summarizer_model)}")
    own_prompt = p.summarizer_prompt.content if p.summarizer_prompt else None
    print(f"summarizer prompt: {f'its own, {len(own_prompt):,} characters' if own_prompt else '(default)'}")
    print(f"avatar:            {p.avatar_url or '-'}")
    print(f"created:           {p.created_at:%Y-%m-%d %H:%M} UTC")
    print("system prompt:")
    for line in p.system_prompt.splitlines() or [""]:
        print(f"  {line}")


async def cmd_personality_set(args: argparse.Namespace, core: Core) -> None:
    service = core.personalities
    summarizer = await service.choose_model(
        model=args.summarizer_model, llm_config=args.summarizer_llm_config
    )
    prompt = read_text_file(args.prompt_file, "prompt") if args.prompt_file else args.prompt
    summarizer_prompt = (
        read_text_file(args.summarizer_prompt_file, "summarizer prompt")
        if args.summarizer_prompt_file
        else args.summarizer_prompt
    )
    avatar = "" if args.avatar is not None and args.avatar.strip().lower() == "none" else args.avatar
    p = await service.edit(
        args.name,
        actor=None,
        display_name=args.display_name,
        prompt=prompt,
        model=await _chat_model(core, args),
        avatar_url=avatar,
        memory=None if args.memory is None else args.memory == "on",
        memory_mode=args.memory_mode,
        summarizer_model=summarizer,
        summarizer_prompt=summarizer_prompt,
    )
    memory = f"memory {'on' if p.memory_enabled else 'off'}, mode {p.memory_mode}"
    print(f"Updated personality {p.name!r} ({p.display_name}): {memory}.")


async def cmd_personality_delete(args: argparse.Namespace, runtime: Runtime) -> None:
    p = await runtime.personalities.get(args.name)
    memories = (await runtime.memory.stats(personality_id=p.id)).memories
    question = f"Delete {p.name!r} ({p.display_name}) with its {memories} memories and every conversation?"
    if not confirm(question, yes=args.yes):
        print("Nothing deleted.")
        return
    await runtime.memory.delete_personality(runtime.personalities, p.name, actor=None)
    print(f"Deleted personality {p.name!r} with its {memories} memories and conversations.")


async def cmd_personality_import(args: argparse.Namespace, core: Core) -> None:
    from memory.owners.card_pictures import CardPictures, import_card
    from memory.owners.cards import read_card_file

    card = read_card_file(args.file)
    # No host for the card's picture as an avatar here: the card's own https avatar URL, if it names
    # one. The picture itself is kept for `export`.
    imported = await import_card(
        core.personalities,
        CardPictures(core.sessionmaker),
        card,
        name=args.name,
        owner_id=args.owner,
        by_operator=True,
        avatar_url=card.avatar_url,
        memory_mode=args.memory_mode,
        display_name=args.display_name,
    )
    p = imported.personality
    print(f"Imported {card.version} card {p.display_name!r} as personality {p.name!r} ({p.memory_mode}).")
    print(f"prompt:   {len(p.system_prompt):,} characters")
    for line in imported.report.lines():
        print(line)
    print(f"avatar:   {p.avatar_url or '-'}")
    if imported.picture_kept:
        print("picture:  kept; `personality export NAME -o FILE.png` writes the card back in it")


async def cmd_personality_export(args: argparse.Namespace, core: Core) -> None:
    from memory.owners.card_pictures import CardPictures
    from memory.owners.cards import export_card

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
            raise CommandError(f"Cannot read {args.image}: {exc.strerror}") from None
        data = await CardPictures(core.sessionmaker).export_png(personality, picture)
    try:
        args.output.write_bytes(data)
    except OSError as exc:
        raise CommandError(f"Cannot write {args.output}: {exc.strerror}") from None
    print(f"Wrote {args.output}.")
