"""Pure helpers for Discord message text."""

from __future__ import annotations

import re

DISCORD_LIMIT = 2000

_SENTENCE_END_RE = re.compile(r"(?<=[.!?…])[\"')\]”’]*\s+")


def _cut_point(text: str, limit: int) -> int:
    """Where to cut `text` so the first part fits `limit`: paragraph, line, sentence, word, else hard."""
    window = text[:limit]
    for separator in ("\n\n", "\n"):
        at = window.rfind(separator)
        if at > limit // 4:
            return at + len(separator)
    sentence_ends = [m.end() for m in _SENTENCE_END_RE.finditer(window)]
    if sentence_ends and sentence_ends[-1] > limit // 4:
        return sentence_ends[-1]
    space = window.rfind(" ")
    if space > limit // 4:
        return space + 1
    return limit


def split_message(text: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Split text into parts of at most `limit` characters at paragraph or sentence boundaries."""
    if limit < 1:
        raise ValueError("limit must be positive")
    text = text.strip()
    parts: list[str] = []
    while len(text) > limit:
        cut = _cut_point(text, limit)
        part = text[:cut].rstrip()
        if part:
            parts.append(part)
        text = text[cut:].lstrip()
    if text:
        parts.append(text)
    return parts
