"""How a question is searched by meaning: without the names of the two who talk in every memory.

Every memory of a user with a personality is written as `Name: text` lines of those two (the user's
name and the personality's), so their names tell one memory from another not at all; in a question
("What does Melanie like?", "Jon, remember Rome?") they only pull the dense side towards the
memories where the name weighs most: the shortest ones, a greeting or a thank-you. The dense query
leaves them out; the keyword side keeps the question whole (a name it finds in every memory weighs
little there, and a date such as "in May" must never be lost to a user called May).

The names are the personality's display name and the names the user's own recent messages were
logged under, read once per (personality, user) and kept for NAMES_TTL seconds.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection

from sqlalchemy import CompoundSelect, and_, select, union

from memory.types import MemoryState
from models import Memory, Message, Personality

# A rename reaches recall within this many seconds; until then the old name is still left out.
NAMES_TTL = 600.0
# Entries kept before the oldest are dropped: one per (personality, user) recalled for recently.
NAMES_KEPT = 10_000
# The user's names are read from the messages of their most recent memories, this many.
RECENT_MEMORIES = 20


def dense_query(query: str, names: Collection[str]) -> str:
    """The query without the participants' names (whole words, as written, possessive included).

    A query that is nothing but names is searched as given.
    """
    words = sorted({w for name in names for w in _name_forms(name)}, key=len, reverse=True)
    if not words:
        return query
    pattern = r"(?<!\w)(?:" + "|".join(re.escape(w) for w in words) + r")(?:['’]s)?(?!\w)"
    stripped = " ".join(re.sub(pattern, " ", query).split())
    return stripped if re.search(r"\w", stripped) else query


def _name_forms(name: str) -> list[str]:
    """A name as it may be written in a question: whole, and its first word ("Ana Lima" -> "Ana")."""
    name = name.strip()
    if len(name) < 2:
        return []
    first = name.split()[0]
    return [name, first] if first != name and len(first) >= 2 else [name]


class ParticipantNames:
    """The names of the two who talk in a user's memories of a personality, once read, kept for
    NAMES_TTL seconds: recall reads them (`names_of`) in its own first query when they are not kept."""

    def __init__(self) -> None:
        self._kept: dict[tuple[int, str], tuple[float, frozenset[str]]] = {}

    def kept(self, personality_id: int, user_id: str) -> frozenset[str] | None:
        """The names if they were read less than NAMES_TTL seconds ago, else None."""
        kept = self._kept.get((personality_id, user_id))
        if kept is not None and time.monotonic() - kept[0] < NAMES_TTL:
            return kept[1]
        return None

    def keep(self, personality_id: int, user_id: str, names: frozenset[str]) -> None:
        if len(self._kept) >= NAMES_KEPT:
            self._kept.pop(next(iter(self._kept)))
        self._kept[(personality_id, user_id)] = (time.monotonic(), names)


def names_of(personality_id: int, user_id: str) -> CompoundSelect[str | None]:
    """The personality's display name and the user's names in their recent memories (one column,
    `name`, possibly null), as one statement."""
    recent = (
        select(Memory.conversation_id, Memory.source_message_ids[1].label("first"))
        .where(
            Memory.personality_id == personality_id,
            Memory.user_id == user_id,
            Memory.state != MemoryState.DELETED.value,
        )
        .order_by(Memory.occurred_at.desc())
        .limit(RECENT_MEMORIES)
        .subquery()
    )
    users = (
        select(Message.author_name.label("name"))
        .join(
            recent,
            and_(Message.conversation_id == recent.c.conversation_id, Message.external_id == recent.c.first),
        )
        .where(Message.author_id == user_id, Message.author_name.is_not(None))
    )
    personality = select(Personality.display_name.label("name")).where(Personality.id == personality_id)
    return union(personality, users)
