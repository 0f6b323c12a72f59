"""A user's memories as the JSONL that `personae import` reads back: what `/memory export` and
`personae memory export` write. It reads PostgreSQL only, so it runs beside a process holding the index."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.types import MemoryState
from models import Memory, Message, Persona, Personality


class MemoryExport:
    """Writes a user's memories, with the messages they came from and the user's personas, as JSONL."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def export_lines(self, *, user_id: str, personality_id: int | None = None) -> list[str]:
        """The user's memories as JSONL in the shape `personae import` reads.

        First the user's personas (a `persona` line each: the global one and those of the exported
        personalities), then one line per source message (id, role, content, timestamp, author,
        user_id, channel_id, guild_id, personality, and reply_to on a reply); the last line of each
        exchange also carries the memory: its stored text, mode, summarizer and provenance. A memory
        whose messages are gone is one user line of its text. Every line names its personality, so an
        export of several imports back to each its own.
        """
        query = (
            select(Memory, Personality.name)
            .join(Personality, Personality.id == Memory.personality_id)
            .where(Memory.user_id == user_id, Memory.state != MemoryState.DELETED.value)
        )
        if personality_id is not None:
            query = query.where(Memory.personality_id == personality_id)
        lines: list[str] = []
        async with self._sessionmaker() as session:
            lines.extend(await _persona_lines(session, user_id, personality_id))
            rows = (await session.execute(query.order_by(Memory.occurred_at, Memory.id))).all()
            wanted = {m.conversation_id for m, _ in rows if m.conversation_id is not None}
            source_ids = {i for m, _ in rows for i in m.source_message_ids}
            by_key: dict[tuple[int | None, str], Message] = {}
            # One query for every source message (ids are unique per conversation), not one per memory.
            for start in range(0, len(source_ids), 5000):
                chunk = sorted(source_ids)[start : start + 5000]
                for message in await session.scalars(
                    select(Message).where(Message.conversation_id.in_(wanted), Message.external_id.in_(chunk))
                ):
                    by_key[(message.conversation_id, message.external_id)] = message
            # A reply names the message it answers, so an export imports back with its links.
            external_ids = {m.id: m.external_id for m in by_key.values()}
            for memory, personality_name in rows:
                messages = sorted(
                    (
                        by_key[(memory.conversation_id, i)]
                        for i in memory.source_message_ids
                        if (memory.conversation_id, i) in by_key
                    ),
                    key=lambda m: m.id,
                )
                records: list[dict[str, Any]] = [
                    {
                        "id": m.external_id,
                        "role": m.role,
                        "content": m.content,
                        "timestamp": m.created_at.isoformat(),
                        "author": m.author_name,
                        "user_id": memory.user_id,
                        "channel_id": memory.channel_id,
                        "guild_id": memory.guild_id,
                        "personality": personality_name,
                    }
                    | ({"reply_to": external_ids[m.reply_to_id]} if m.reply_to_id in external_ids else {})
                    for m in messages
                ]
                if not records:
                    records = [
                        {
                            "id": f"memory-{memory.id}",
                            "role": "user",
                            "content": memory.content_verbatim or memory.content,
                            "timestamp": memory.occurred_at.isoformat(),
                            "author": None,
                            "user_id": memory.user_id,
                            "channel_id": memory.channel_id,
                            "guild_id": memory.guild_id,
                            "personality": personality_name,
                        }
                    ]
                records[-1]["memory"] = {
                    "id": str(memory.id),
                    "personality": personality_name,
                    "mode": memory.mode,
                    "content": memory.content,
                    "content_verbatim": memory.content_verbatim,
                    "summarized": memory.summarized,
                    "summarizer": memory.summarizer,
                    "source_message_ids": list(memory.source_message_ids),
                    "occurred_at": memory.occurred_at.isoformat(),
                    "is_dm": memory.is_dm,
                    "fidelity_misses": list(memory.fidelity_misses),
                }
                lines.extend(jsonl_line(r) for r in records)
        return lines


# Characters JSON may hold raw but that end a line for str.splitlines() (and for JavaScript before
# ES2019): written escaped, an export reads back line by line in any of them.
_LINE_BREAKERS = {ord(c): f"\\u{ord(c):04x}" for c in "\u0085\u2028\u2029"}


def jsonl_line(record: dict[str, Any]) -> str:
    """One JSONL line: readable text (not ASCII-escaped), with the line breakers escaped."""
    return json.dumps(record, ensure_ascii=False).translate(_LINE_BREAKERS)


async def _persona_lines(session: AsyncSession, user_id: str, personality_id: int | None) -> list[str]:
    """The user's personas as export lines: all of them, or the global one and that personality's."""
    query = (
        select(Persona, Personality.name)
        .outerjoin(Personality, Personality.id == Persona.personality_id)
        .where(Persona.user_id == user_id)
        .order_by(Persona.personality_id.is_not(None), Personality.name)
    )
    if personality_id is not None:
        query = query.where(or_(Persona.personality_id.is_(None), Persona.personality_id == personality_id))
    return [
        jsonl_line(
            {
                "persona": {
                    "personality": personality_name,
                    "name": persona.name,
                    "pronouns": persona.pronouns,
                    "about": persona.about,
                }
            }
        )
        for persona, personality_name in (await session.execute(query)).all()
    ]
