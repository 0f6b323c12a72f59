"""`personae memory status|settings|incognito|reset`: how a user's memory behaves, as /memory status,
settings, incognito and reset show and steer it, through the same services (MemoryService.status,
UserSettingsService, IncognitoService, ChatService.reset_conversation)."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import TYPE_CHECKING

from bot.cli.output import CommandError, check_id

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Core, Runtime
    from memory.owners.incognito import IncognitoSpan
    from memory.service import MemoryStatus
    from models import Persona, Personality, UserSettings

USER_HELP = "whose memory: their Discord user id (or the --user of `personae chat`)"
# /memory incognito's `for` choices, `until off` spelled for a shell.
DURATIONS: dict[str, timedelta | None] = {
    "1h": timedelta(hours=1),
    "1d": timedelta(days=1),
    "until-off": None,
}
MEMORY_STATE = {None: "inherited", True: "on", False: "off"}
# What a reset does besides the summary (memory.formation.reset).
RESET_PENDING = (
    "Anything they said there that is not yet a memory never will be; memories already formed stay."
)


def add_commands(memory: Subcommands) -> None:
    """The subcommands of `personae memory` about how a user's memory behaves."""
    status = memory.add_parser("status", help="a user's memory settings, storage and pending work")
    _options(status, "only this personality (default: all of them)")
    status.set_defaults(handler=cmd_memory_status, index_when_used=True)

    settings = memory.add_parser(
        "settings",
        help="a user's own memory preferences: shown, or changed with the options given",
        description="A user's own memory preferences, for every personality or one; without "
        "--summarization or --memory, shown.",
    )
    settings.add_argument(
        "--summarization",
        choices=("enabled", "disabled", "default"),
        help="enabled: condensed; disabled: word for word; default: the personality's choice",
    )
    settings.add_argument(
        "--memory", choices=("on", "off"), help="on: remember the conversations; off: store no new memories"
    )
    _options(settings, "only for this personality (default: for all of them)")
    settings.set_defaults(handler=cmd_memory_settings, index_when_used=True)

    incognito = memory.add_parser("incognito", help="talk without forming memories, for a while or until off")
    incognito.add_argument(
        "state",
        choices=("on", "off"),
        help="on: nothing said from now on becomes a memory; off: they form again",
    )
    _options(incognito, "only with this personality (default: with every personality)")
    incognito.add_argument(
        "--for",
        dest="duration",
        choices=tuple(DURATIONS),
        default="until-off",
        help="how long it stays on (default: until-off)",
    )
    incognito.set_defaults(handler=cmd_memory_incognito)

    reset = memory.add_parser(
        "reset",
        help="clear a conversation's rolling summary and what is not yet remembered of it (memories stay)",
        description="Clear the rolling summary of a personality's conversation with the user (the "
        "terminal chat's, or a Discord channel's with --guild and --channel), and cancel what the user "
        "said there that is not yet a memory. Memories already formed stay.",
    )
    reset.add_argument("--user", required=True, help=USER_HELP)
    reset.add_argument("--personality", required=True, help="the personality whose conversation to reset")
    reset.add_argument("--guild", help="a Discord guild id (default: the terminal chat's conversation)")
    reset.add_argument("--channel", help="with --guild: the channel id")
    reset.set_defaults(handler=cmd_memory_reset, index_when_used=True)


def _options(parser: argparse.ArgumentParser, personality_help: str) -> None:
    parser.add_argument("--user", required=True, help=USER_HELP)
    parser.add_argument("--personality", help=personality_help)


async def _scope(core: Core, args: argparse.Namespace) -> tuple[str, Personality | None]:
    user = check_id(str(args.user), "--user")
    return user, (await core.personalities.get_detailed(args.personality) if args.personality else None)


def _with(p: Personality | None) -> str:
    return f"with {p.display_name}" if p else "with every personality"


def _named(p: Personality | None) -> str:
    """The --personality option that names `p` again in a command shown, or nothing."""
    return f" --personality {p.name}" if p else ""


def _until(span: IncognitoSpan) -> str:
    return "until turned off" if span.ends_at is None else f"until {span.ends_at:%Y-%m-%d %H:%M} UTC"


def _span(span: IncognitoSpan) -> str:
    scope = f"with {span.personality_name}" if span.personality_name else "with every personality"
    return f"{scope}, {_until(span)}"


async def cmd_memory_status(args: argparse.Namespace, runtime: Runtime) -> None:
    from bot.cli.terminal import terminal_venue

    user, p = await _scope(runtime, args)
    status = await runtime.memory.status(user_id=user, personality=p, venue=terminal_venue(user))
    print("\n".join(status_lines(user, status)))


def status_lines(user: str, status: MemoryStatus) -> list[str]:
    """/memory status in plain text: with one personality or all, then fresh, incognito, persona."""
    from bot.texts import storage_lines

    stats, p = status.stats, status.personality
    if p is None:
        general = status.general_settings
        enabled = general.memory_enabled if general else None
        memory = {None: "on unless a personality turns it off", True: "on", False: "off"}[enabled]
        lines = [
            f"User {user} with every personality",
            f"Memory: {memory}",
            f"Summarization: {general.summarization if general else 'default'} "
            "(default = each personality's choice)",
        ]
    else:
        mode, source = status.mode, status.mode_set_by
        lines = [f"User {user} with {p.display_name}", f"Memory: {'on' if mode else 'off'} (set by {source})"]
        if mode is not None:
            lines.append(f"Stored as: {mode} (set by {source})")
        summarizer = status.summarizer
        lines.append(f"Summarizer model: {summarizer.model if summarizer else 'none (extractive summaries)'}")
        if status.conversation_title:
            lines.append(f"Terminal conversation: {status.conversation_title}")
    lines.extend(storage_lines(stats))
    if p is not None:
        lines.append(f"Pending: {stats.pending_messages} messages waiting to become memories")
    fresh = "on (replies use none of their memories; new ones still form)" if status.fresh else "off"
    lines.append(f"Fresh mode: {fresh}")
    spans = status.incognito
    lines.append("Incognito: " + ("on " + "; on ".join(map(_span, spans)) if spans else "off"))
    lines.append(f"Persona: {_persona(status.persona)}")
    return lines


def _persona(persona: Persona | None) -> str:
    if persona is None:
        return "none (`personae persona set` tells the personalities who the user is)"
    scope = "every personality" if persona.personality_id is None else "this personality"
    who = persona.name + (f" ({persona.pronouns})" if persona.pronouns else "")
    return f"{who}, set for {scope}" + (f": {persona.about}" if persona.about else "")


def _settings_line(p: Personality | None, row: UserSettings | None) -> str:
    state = MEMORY_STATE[row.memory_enabled if row else None]
    return f"{_with(p)}: memory {state}, summarization {row.summarization if row else 'default'}."


async def cmd_memory_settings(args: argparse.Namespace, runtime: Runtime) -> None:
    user, p = await _scope(runtime, args)
    scope = p.id if p else None
    if args.summarization is None and args.memory is None:
        row = await runtime.user_settings.get(user, scope)
        print(f"Settings of user {user} {_settings_line(p, row)}")
        return
    changes = {} if args.memory is None else {"memory_enabled": args.memory == "on"}
    saved = await runtime.user_settings.update(user, scope, summarization=args.summarization, **changes)
    print(f"Saved: user {user} {_settings_line(p, saved)}")
    if args.memory == "off":
        kept = (await runtime.memory.stats(personality_id=scope, user_id=user)).memories
        print("No new memories will be stored.", end="")
        if kept:
            forget = f"personae memory forget all --user {user}{_named(p)}"
            print(f" The {kept} already kept stay: `{forget}` deletes them.", end="")
        print()


async def cmd_memory_incognito(args: argparse.Namespace, core: Core) -> None:
    user, p = await _scope(core, args)
    service = core.incognito
    if args.state == "on":
        span = await service.start(user, p.id if p else None, DURATIONS[args.duration])
        print(
            f"Incognito is on for user {user} {_span(span)}: nothing they say from now on becomes a "
            f"memory. `personae memory incognito off --user {user}{_named(p)}` ends it."
        )
        return
    ended = await service.stop(user, p.id if p else None)
    still = await service.active(user, p.id) if p is not None else None
    if ended:
        text = f"Incognito is off for user {user} {_with(p)}: what they say can become memories again."
    else:
        text = f"Incognito was not on for user {user} {_with(p)}."
    if still is not None:
        text += f" It is still on {_span(still)}: without --personality, `incognito off` ends it."
    print(text)


async def cmd_memory_reset(args: argparse.Namespace, runtime: Runtime) -> None:
    from bot.cli.terminal import CHANNEL

    user = check_id(str(args.user), "--user")
    if args.channel is not None and args.guild is None:
        raise CommandError("--channel needs --guild (without both: the terminal chat's conversation)")
    guild = check_id(args.guild, "--guild")
    channel = check_id(args.channel, "--channel") if guild is not None else CHANNEL
    p = await runtime.personalities.get(args.personality)
    removed = await runtime.chat.reset_conversation(
        personality_id=p.id, guild_id=guild, channel_id=channel, user_id=user
    )
    where = "in the terminal chat" if guild is None else f"in channel {channel} of guild {guild}"
    done = (
        f"Cleared the conversation summary of {p.display_name} with user {user} {where}."
        if removed
        else f"{p.display_name} has no conversation summary with user {user} {where}; nothing to clear."
    )
    print(done, RESET_PENDING)
