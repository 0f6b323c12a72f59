"""The text of /memory's replies (and its message menus'), built from what the services returned."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from bot.messages import DISCORD_LIMIT
from bot.texts import excerpt, storage_lines, who

if TYPE_CHECKING:
    import uuid

    from memory.owners.incognito import IncognitoSpan
    from memory.service import BrowsedMemory, MemoryStats, MemoryStatus
    from models import Persona, Personality, UserSettings

# A user's memory setting: inherited from the wider scope (None), on or off.
MEMORY_STATE = {None: "inherited", True: "on", False: "off"}
NO_PERSONA = "none (`/persona set` tells the personalities who you are)"


def scope_of(p: Personality | None) -> str:
    return f"with **{p.display_name}**" if p else "with every personality"


def memory_status(status: MemoryStatus) -> str:
    """/memory status: with one personality or with all, then incognito and the persona."""
    if status.personality is None:
        text = overall_status(status.general_settings, status.stats)
    else:
        text = personality_status(status)
    lines = [text, fresh_status(status.fresh), incognito_status(status.incognito)]
    return "\n".join([*lines, persona_status(status.persona)])


def fresh_status(on: bool) -> str:
    """The /memory status line of fresh mode."""
    if on:
        return "Fresh mode: on (replies use none of your memories; new ones still form)"
    return "Fresh mode: off"


def fresh_set(p: Personality | None, on: bool) -> str:
    """After /memory fresh."""
    if on:
        return (
            f"Fresh mode is on {scope_of(p)}: replies use none of your memories, and nothing is deleted. "
            "New memories still form (`/memory incognito` stops that). `/memory fresh state: off` ends it."
        )
    return f"Fresh mode is off {scope_of(p)}: replies use your memories again."


def personality_status(status: MemoryStatus) -> str:
    """/memory status for one personality: the effective mode and who set it, the model, storage."""
    p, mode, source, stats = status.personality, status.mode, status.mode_set_by, status.stats
    assert p is not None
    lines = [f"**{p.display_name}** and you", f"Memory: {'on' if mode else 'off'} (set by {source})"]
    if mode is not None:
        lines.append(f"Stored as: {mode} (set by {source})")
    summarizer = status.summarizer
    lines.append(f"Summarizer model: {summarizer.model if summarizer else 'none (extractive summaries)'}")
    if status.conversation_title:
        lines.append(f"Conversation here: {status.conversation_title}")
    lines.extend(storage_lines(stats))
    lines.append(f"Pending: {stats.pending_messages} messages waiting to become memories")
    return "\n".join(lines)


def overall_status(general: UserSettings | None, stats: MemoryStats) -> str:
    """/memory status across personalities: the user's own general settings, storage."""
    enabled = general.memory_enabled if general else None
    memory = {None: "on unless a personality turns it off", True: "on", False: "off"}[enabled]
    lines = [
        "**All personalities**",
        f"Memory: {memory}",
        f"Summarization: {general.summarization if general else 'default'} "
        "(default = each personality's choice)",
        *storage_lines(stats),
    ]
    return "\n".join(lines)


def _until(span: IncognitoSpan) -> str:
    if span.ends_at is None:
        return "until you turn it off"
    at = int(span.ends_at.timestamp())
    return f"until <t:{at}:f> (<t:{at}:R>)"  # Discord shows these in the reader's time zone


def _incognito_scope(span: IncognitoSpan) -> str:
    return f"with **{span.personality_name}**" if span.personality_name else "with every personality"


def incognito_status(spans: Sequence[IncognitoSpan]) -> str:
    """The /memory status line: which incognito spans are on, and until when."""
    if not spans:
        return "Incognito: off"
    return "Incognito: on " + "; on ".join(f"{_incognito_scope(s)}, {_until(s)}" for s in spans)


def incognito_started(span: IncognitoSpan, reaction: str) -> str:
    who = f"**{span.personality_name}**" if span.personality_name else "Every personality"
    return (
        f"Incognito is on {_incognito_scope(span)}, {_until(span)}. {who} still answers you and follows "
        "the conversation, but nothing you say from now on becomes a memory, and no "
        f"{reaction} appears on your messages. `/memory incognito state: off` ends it."
    )


def incognito_stopped(p: Personality | None, ended: int, still: IncognitoSpan | None) -> str:
    """After /memory incognito off; `still`: a span for every personality that naming `p` left on."""
    if ended:
        text = (
            f"Incognito is off {scope_of(p)}: what you say from now on can become memories again. "
            "What you said while incognito never will."
        )
    else:
        text = f"Incognito was not on {scope_of(p)}."
    if still is not None:
        text += (
            f" It is still on {_incognito_scope(still)}, {_until(still)}: "
            "`/memory incognito state: off` without a personality ends it."
        )
    return text


def settings_shown(p: Personality | None, row: UserSettings | None) -> str:
    state = MEMORY_STATE[row.memory_enabled if row else None]
    return (
        f"Your settings {scope_of(p)}: memory {state}, summarization "
        f"{row.summarization if row else 'default'}."
    )


def settings_saved(p: Personality | None, row: UserSettings) -> str:
    return (
        f"Saved: {scope_of(p)}, memory {MEMORY_STATE[row.memory_enabled]}, summarization {row.summarization}."
    )


def search_results(query: str, found: Sequence[BrowsedMemory], short_ids: Mapping[uuid.UUID, str]) -> str:
    """The hits, each named by its short id (a unique prefix, as the CLI lists it and /memory show takes)."""
    if not found:
        return "No memories match that."
    lines = [f"Your memories matching “{excerpt(query, 60)}”:"]
    for m in found:
        named = short_ids.get(m.id, m.id)
        lines.append(f"`{named}` {m.occurred_at:%Y-%m-%d}, {m.personality_name}: {excerpt(m.content)}")
    lines.append(
        "See one whole with `/memory show memory:<id>`, forget one with `/memory forget memory:<id>`."
    )
    return "\n".join(lines)[:DISCORD_LIMIT]


def conversation_reset(p: Personality, removed: int) -> str:
    text = (
        f"Cleared the conversation summary of **{p.display_name}** here."
        if removed
        else f"**{p.display_name}** has no conversation summary here; nothing to clear."
    )
    return text + " " + RESET_PENDING


# What a reset does besides the summary (memory.formation.reset), in every reply to one.
RESET_PENDING = (
    "Anything you said here that is not yet a memory never will be. Long-term memories are untouched."
)


EXPORT_NOTE = (
    "Your memories: one line per message, each exchange's memory on its last line. "
    "`personae import` reads this file."
)


def export_filename(p: Personality | None) -> str:
    return f"personae-memories-{p.name if p else 'all'}.jsonl"


def persona_status(persona: Persona | None) -> str:
    """The persona line of /memory status: the effective persona (of a personality, or the global one)."""
    if persona is None:
        return f"Persona: {NO_PERSONA}"
    scope = "every personality" if persona.personality_id is None else "this personality"
    about = f": {excerpt(persona.about, 80)}" if persona.about else ""
    return f"Persona: {who(persona)}, set for {scope}{about}"
