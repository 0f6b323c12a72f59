"""Text that several features' replies share (Discord markdown)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.service import MemoryStats
    from models import Persona

EXCERPT_CHARS = 160


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def who(persona: Persona) -> str:
    """**Name** (pronouns)"""
    return f"**{persona.name}**" + (f" ({persona.pronouns})" if persona.pronouns else "")


def characters(n: int) -> str:
    return f"{n:,} character{'' if n == 1 else 's'}"


def storage_lines(stats: MemoryStats) -> list[str]:
    """What a personality's (or a user's) memories take: how many, their size, what summaries kept."""
    lines = [
        f"Memories: {stats.memories}",
        f"Storage: {characters(stats.stored_chars)} (verbatim would be {characters(stats.source_chars)}, "
        f"saving {stats.saving_percent:.0f}%)",
    ]
    if stats.verbatim_chars:
        lines.append(f"Verbatim kept (hybrid, pinned, corrected): {characters(stats.verbatim_chars)}")
    if failed := stats.fallback_line():
        lines.append(f"Summaries: {failed}")
    return lines
