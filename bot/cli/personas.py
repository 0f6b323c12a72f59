"""`personae persona set|show|clear`: who a user is to the personalities, as /persona sets it, through
the same PersonaService and its checks."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from bot.cli.output import check_id, command_group

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Core
    from models import Persona, Personality

USER_HELP = "whose persona: their Discord user id (or the --user of `personae chat`)"


def add_commands(commands: Subcommands) -> None:
    persona = command_group(commands, "persona", "who a user is to the personalities: set, show, clear")
    set_ = persona.add_parser("set", help="tell the personalities who the user is (replaces the old one)")
    # The limits of each field are the service's, said when one is over (`personae --help` stays light).
    set_.add_argument("name", help="the name they call the user")
    set_.add_argument("--pronouns", help="the user's pronouns, e.g. she/her")
    set_.add_argument("--about", help="a few words about the user they should know")
    _options(set_, "only for this personality (default: for all of them)")
    set_.set_defaults(handler=cmd_persona_set)

    show = persona.add_parser("show", help="the persona the personalities know the user by")
    _options(show, "the persona this personality knows the user by (default: the global one)")
    show.set_defaults(handler=cmd_persona_show)

    clear = persona.add_parser("clear", help="remove a persona")
    _options(clear, "only this personality's persona (default: the global one)")
    clear.set_defaults(handler=cmd_persona_clear)


def _options(parser: argparse.ArgumentParser, personality_help: str) -> None:
    parser.add_argument("--user", required=True, help=USER_HELP)
    parser.add_argument("--personality", help=personality_help)


async def _scope(core: Core, args: argparse.Namespace) -> tuple[str, Personality | None]:
    user = check_id(str(args.user), "--user")
    return user, (await core.personalities.get(args.personality) if args.personality else None)


def _scope_text(p: Personality | None) -> str:
    return f"for {p.display_name}" if p else "for every personality"


def _who(persona: Persona) -> str:
    return persona.name + (f" ({persona.pronouns})" if persona.pronouns else "")


def persona_lines(persona: Persona, p: Personality | None) -> list[str]:
    """A persona in full: name, pronouns, about."""
    lines = [f"Persona {_scope_text(p)}:", f"  name:     {persona.name}"]
    if persona.pronouns:
        lines.append(f"  pronouns: {persona.pronouns}")
    if persona.about:
        lines.append(f"  about:    {persona.about}")
    return lines


async def cmd_persona_set(args: argparse.Namespace, core: Core) -> None:
    user, p = await _scope(core, args)
    persona = await core.personas.set(
        user, p.id if p else None, name=args.name, pronouns=args.pronouns, about=args.about
    )
    print("Saved. " + "\n".join(persona_lines(persona, p)))


async def cmd_persona_show(args: argparse.Namespace, core: Core) -> None:
    user, p = await _scope(core, args)
    own = await core.personas.get(user, p.id if p else None)
    if own is not None:
        lines = persona_lines(own, p)
    elif p is not None and (general := await core.personas.get(user)) is not None:
        own_none = f"User {user} has no persona of their own for {p.display_name}"
        lines = [f"{own_none}; it knows them by the global one."]
        lines += persona_lines(general, None)
    else:
        lines = [f"User {user} has no persona {_scope_text(p)}. `personae persona set` sets one."]
    if p is None:  # also the names the user goes by with single personalities
        others = [(x, of) for x, of in await core.personas.all_of(user) if of is not None]
        if others:
            lines.append(
                "For single personalities: "
                + ", ".join(f"{_who(x)} with {of.display_name}" for x, of in others)
            )
    print("\n".join(lines))


async def cmd_persona_clear(args: argparse.Namespace, core: Core) -> None:
    user, p = await _scope(core, args)
    if not await core.personas.clear(user, p.id if p else None):
        print(f"User {user} has no persona {_scope_text(p)}; nothing to clear.")
        return
    text = f"Cleared the persona of user {user} {_scope_text(p)}."
    if p is not None and (general := await core.personas.get(user)) is not None:
        text += f" {p.display_name} will know them by the global persona, {_who(general)}."
    print(text)
