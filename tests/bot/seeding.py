"""Memories made the way the bot makes them: a transcript through the real importer and memory service."""

from __future__ import annotations

import json

from bot.runtime import Runtime
from memory.transfer.transcript import parse_transcript
from models import Personality

EXCHANGES = (
    ("My dog is called Biscuit and she loves the beach.", "Biscuit sounds like a happy dog!"),
    ("I am moving to Lisbon in March for a new job.", "Lisbon in March, how exciting."),
    ("My favourite book is The Left Hand of Darkness.", "A wonderful choice, Le Guin is great."),
)


async def seed_memories(
    runtime: Runtime,
    personality: Personality,
    user_id: str,
    *,
    exchanges: tuple[tuple[str, str], ...] = EXCHANGES,
    guild_id: str | None = None,
    channel_id: str | None = None,
    prefix: str = "m",
) -> int:
    """Import these exchanges for the user; returns how many memories were formed."""
    records = []
    for i, (said, answered) in enumerate(exchanges):
        for role, content, suffix in (("user", said, "u"), ("assistant", answered, "a")):
            records.append(
                {
                    "id": f"{prefix}{user_id}-{i}{suffix}",
                    "role": role,
                    "content": content,
                    "timestamp": f"2024-03-{10 + i:02d}T12:00:0{'0' if role == 'user' else '5'}Z",
                    "user_id": user_id if role == "user" else None,
                    "guild_id": guild_id,
                    "channel_id": channel_id,
                }
            )
    lines, skipped = parse_transcript("\n".join(json.dumps(r) for r in records))
    report = await runtime.transfer.import_transcript(
        lines,
        personality=personality,
        default_user_id=user_id,
        skipped_lines=skipped,
    )
    return int(report.formation.memories)
