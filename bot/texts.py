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
    change = stats.kept_change_percent
    if change <= 0:
        against = f"saving {-change:.0f}% against storing it word for word"
    else:
        against = f"costing {change:.0f}% more than storing it word for word"
    lines = [
        f"Memories: {stats.memories}",
        f"Storage: {characters(stats.kept_chars)} for {characters(stats.source_chars)} said ({against})",
    ]
    if stats.verbatim_chars:
        lines.append(
            f"Of which originals kept beside summaries (hybrid, pinned, corrected): "
            f"{characters(stats.verbatim_chars)}"
        )
    if failed := stats.fallback_line():
        lines.append(f"Summaries: {failed}")
    lines.extend(line[0].upper() + line[1:] for line in stats.one_exchange_lines())
    return lines
