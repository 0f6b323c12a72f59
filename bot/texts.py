"""Text that several features' replies share (Discord markdown)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models import Persona

EXCERPT_CHARS = 160


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def who(persona: Persona) -> str:
    """**Name** (pronouns)"""
    return f"**{persona.name}**" + (f" ({persona.pronouns})" if persona.pronouns else "")
