"""The text of /persona's replies (Discord markdown)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.texts import who

if TYPE_CHECKING:
    from models import Persona, Personality


def _scope(p: Personality | None) -> str:
    return f"for **{p.display_name}**" if p else "for every personality"


def persona_card(persona: Persona, p: Personality | None) -> str:
    """A persona in full: name, pronouns, about."""
    lines = [f"Your persona {_scope(p)}:", f"Name: {persona.name}"]
    if persona.pronouns:
        lines.append(f"Pronouns: {persona.pronouns}")
    if persona.about:
        lines.append(f"About: {persona.about}")
    return "\n".join(lines)


def persona_saved(persona: Persona, p: Personality | None) -> str:
    return f"Saved. {persona_card(persona, p)}"


def persona_shown(
    p: Personality | None,
    own: Persona | None,
    general: Persona | None,
    others: Sequence[tuple[Persona, Personality]] = (),
) -> str:
    """/persona show: the persona of that scope, or the global one a personality falls back on, and
    (without a personality) the names the user goes by with single personalities."""
    if own is not None:
        text = persona_card(own, p)
    elif p is not None and general is not None:
        text = f"You have no persona of your own for **{p.display_name}**; it knows you by your global one.\n"
        text += persona_card(general, None)
    else:
        text = f"You have no persona {_scope(p)}. Set one with `/persona set`."
    if others:
        text += "\nFor single personalities: " + ", ".join(
            f"{who(persona)} with {personality.display_name}" for persona, personality in others
        )
    return text


def persona_cleared(p: Personality | None, removed: bool, general: Persona | None = None) -> str:
    if not removed:
        return f"You have no persona {_scope(p)}; nothing to clear."
    text = f"Cleared your persona {_scope(p)}."
    if p is not None and general is not None:
        text += f" {p.display_name} will know you by your global persona, {who(general)}."
    return text
