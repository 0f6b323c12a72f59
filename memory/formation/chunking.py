"""Text too long for one summarizer call, cut into pieces at line, sentence and word boundaries."""

from __future__ import annotations

import re
from collections.abc import Callable

from memory.tokens import count_tokens


def split_into_chunks(text: str, max_tokens: int, count: Callable[[str], int] = count_tokens) -> list[str]:
    """Cut text at line, then sentence, then word boundaries into pieces of at most max_tokens.

    Nothing is dropped or reordered: joining the pieces' words gives the text's words. Only a single
    word longer than max_tokens makes a piece over budget.
    """
    pieces: list[str] = []
    for line in text.splitlines():
        if count(line) <= max_tokens:
            pieces.append(line)
            continue
        for sentence in re.split(r"(?<=[.!?])\s+", line):
            if count(sentence) <= max_tokens:
                pieces.append(sentence)
            else:
                pieces.extend(_pack(sentence.split(), max_tokens, " ", count))
    return [chunk for chunk in _pack(pieces, max_tokens, "\n", count) if chunk.strip()]


def _pack(parts: list[str], max_tokens: int, separator: str, count: Callable[[str], int]) -> list[str]:
    """Consecutive parts joined by separator into runs of at most max_tokens."""
    runs: list[str] = []
    current: list[str] = []
    size = 0
    for part in parts:
        tokens = count(part)
        # The separator costs a token: token counts do not add up exactly across a join.
        if current and size + 1 + tokens > max_tokens:
            runs.append(separator.join(current))
            current, size = [], 0
        size += tokens + (1 if current else 0)
        current.append(part)
    if current:
        runs.append(separator.join(current))
    return runs
