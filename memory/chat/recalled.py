"""Recalled memories as a reply's prompt holds them: each dated, and none the prompt already shows.

A memory formed from messages still inside the prompt's history window would say the same exchange
twice (and count on the reply's receipt as recalled): it is left out, as is a memory of context that
came with a recalled one from there. A memory its user corrected stays: the history still shows the
words the correction overrides, and only the memory says what is right. The date of each lets the
model tell an older memory from a newer one that overrides it (memory.chat.prompt's MEMORY_HEADER says so).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from memory.recall.keywords import spoken_date
from memory.recall.search import RecalledMemory, StoredMemory


def out_of_view(memories: Sequence[RecalledMemory], shown: Collection[str]) -> list[RecalledMemory]:
    """The memories none of whose own messages is among `shown` (message ids), or that their user
    corrected, each with the context of which the same holds."""
    seen = frozenset(shown)

    def new_to_the_prompt(memory: StoredMemory) -> bool:
        return memory.edited_at is not None or seen.isdisjoint(memory.source_message_ids)

    return [
        dataclasses.replace(m, context=tuple(c for c in m.context if new_to_the_prompt(c)))
        for m in memories
        if new_to_the_prompt(m)
    ]


def dated(memory: StoredMemory) -> str:
    """`[8 May 2023] text`."""
    return f"[{spoken_date(memory.occurred_at)}] {memory.content}"


def prompt_text(memory: RecalledMemory) -> str:
    """A recalled memory as the prompt holds it: its own text, then its context, each dated."""
    return "\n".join(dated(m) for m in (memory, *memory.context))
