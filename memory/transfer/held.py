"""Which conversation already holds an imported message: the venue's current one, or one set aside by
`chat --new` (its key then `<venue key>#<id>`, memory.conversations.set_conversation_aside).

Importing a chat again must add nothing whatever conversation the venue is in now: its user lines go
back to the conversation holding them, and their replies follow them there (issue 33).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy import func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from models import Conversation, Message

HeldIn = dict[tuple[int, str, str], int]  # (personality, message id, venue key) -> conversation


class _Identified(Protocol):
    @property
    def id(self) -> Any: ...


async def conversations_holding(
    session: AsyncSession,
    personalities: Sequence[_Identified],
    lines: Sequence[_Identified],
    filed: dict[tuple[int, str], int],
) -> HeldIn:
    """For each line of a batch and the personality it goes to, the conversation of that personality
    holding a message of the line's id, keyed with its venue's key as it was before any `chat --new`
    set the conversation aside. Each is also added to `filed` (the import's conversations, by
    personality and key: here the key it has now), so the import forms what is pending there."""
    pairs = sorted({(p.id, line.id) for p, line in zip(personalities, lines, strict=True)})
    if not pairs:
        return {}
    venue = func.split_part(Conversation.venue_key, "#", 1)
    rows = await session.execute(
        select(Conversation.personality_id, Message.external_id, venue, Message.conversation_id)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .where(tuple_(Conversation.personality_id, Message.external_id).in_(pairs))
        .order_by(Message.conversation_id)
    )
    held: HeldIn = {}
    for personality_id, external_id, venue_key, conversation_id in rows.all():
        held.setdefault((personality_id, external_id, venue_key), conversation_id)
        filed.setdefault((personality_id, f"{venue_key}#{conversation_id}"), conversation_id)
    return held
