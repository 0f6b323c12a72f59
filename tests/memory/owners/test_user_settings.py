from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError
from memory.formation.importer import parse_transcript
from memory.formation.mode import effective_mode
from memory.owners.personalities import PersonalityService
from memory.owners.user_settings import UserSettingsService
from models import UserSettings


async def test_update_upserts_global_and_per_personality_rows(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    personalities = PersonalityService(sessionmaker)
    sage, _ = await personalities.create("Sage", memory_mode="summarized")
    service = UserSettingsService(sessionmaker)
    assert await service.get("1") is None

    general = await service.update("1", memory_enabled=False)
    assert (general.personality_id, general.memory_enabled, general.summarization) == (None, False, "default")
    specific = await service.update("1", sage.id, summarization="disabled")
    assert (specific.personality_id, specific.memory_enabled, specific.summarization) == (
        sage.id,
        None,
        "disabled",
    )
    # Updating again changes only what is given, in the same row.
    again = await service.update("1", summarization="enabled")
    assert (again.id, again.memory_enabled, again.summarization) == (general.id, False, "enabled")
    again = await service.update("1", memory_enabled=None)
    assert again.memory_enabled is None and again.summarization == "enabled"
    async with sessionmaker() as session:
        assert await session.scalar(select(func.count(UserSettings.id))) == 2

    rows = await service.for_personality("1", sage.id)
    mode, source = effective_mode(sage, rows)
    assert (mode, source) == ("verbatim", "user (this personality)")
    assert await service.for_personality("2", sage.id) == []


async def test_bad_summarization_value_is_refused(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    with pytest.raises(InvalidInputError, match="default, enabled, disabled"):
        await UserSettingsService(sessionmaker).update("1", summarization="sometimes")


async def test_an_export_imports_back_with_its_reply_links(runtime: Any) -> None:
    """Each reply line names the message it answers, so a re-import pairs them the same way."""
    lilith, _ = await runtime.personalities.create("Lilith")
    transcript = "\n".join(
        json.dumps(line)
        for line in [
            {
                "id": "1",
                "role": "user",
                "content": "Lilith, my PIN is 4921",
                "user_id": "A",
                "author": "Alice",
                "channel_id": "55",
                "guild_id": "7",
                "timestamp": "2024-05-01T10:00:00+00:00",
            },
            {
                "id": "2",
                "role": "user",
                "content": "Lilith, a good book?",
                "user_id": "B",
                "author": "Bob",
                "channel_id": "55",
                "guild_id": "7",
                "timestamp": "2024-05-01T10:00:01+00:00",
            },
            {
                "id": "3",
                "role": "assistant",
                "content": "Noted, Alice.",
                "reply_to": "1",
                "channel_id": "55",
                "guild_id": "7",
                "timestamp": "2024-05-01T10:00:02+00:00",
            },
            {
                "id": "4",
                "role": "assistant",
                "content": "Dune, Bob.",
                "reply_to": "2",
                "channel_id": "55",
                "guild_id": "7",
                "timestamp": "2024-05-01T10:00:03+00:00",
            },
        ]
    )
    lines, skipped = parse_transcript(transcript)
    await runtime.importer.import_lines(
        lines,
        personality_id=lilith.id,
        personality_user_id="bot",
        default_user_id=None,
        skipped_lines=skipped,
    )
    await runtime.personas.set("A", name="Alice", pronouns="she/her")
    exported = [json.loads(line) for line in await runtime.user_settings.export_lines(user_id="A")]
    assert exported[0]["persona"]["name"] == "Alice"  # the export opens with who the user is
    assert [(r["id"], r.get("reply_to")) for r in exported if "id" in r] == [("1", None), ("3", "1")]

    # Imported again for another personality, the links hold: Alice's reply stays Alice's.
    sage, _ = await runtime.personalities.create("Sage")
    again, skipped = parse_transcript("\n".join(json.dumps(r) for r in exported))
    await runtime.importer.import_lines(
        again, personality_id=sage.id, personality_user_id="bot", default_user_id=None, skipped_lines=skipped
    )
    reimported = [json.loads(line) for line in await runtime.user_settings.export_lines(user_id="A")]
    assert [
        (r["id"], r.get("reply_to"))
        for r in reimported
        if "memory" in r and r["memory"]["personality"] == "sage"
    ] == [("3", "1")]


BREAKERS = "\u2028\u2029\u0085"


async def test_a_whole_account_export_restores_each_memory_to_its_own_personality(runtime: Any) -> None:
    """Two personalities remember the same user from transcripts that reuse ids, in words holding every
    character str.splitlines() breaks at; the export reads back line by line and, imported without
    naming a personality, gives each memory back to its own."""
    lilith, _ = await runtime.personalities.create("Lilith")
    sage, _ = await runtime.personalities.create("Sage")
    for personality, where in ((lilith, {"guild_id": "7", "channel_id": "55"}), (sage, {})):
        transcript = "\n".join(
            json.dumps(line)
            for i in range(3)
            for line in (
                {
                    "id": f"u{i}",
                    "role": "user",
                    "content": f"{personality.name} {i}{BREAKERS}x",
                    "user_id": "A",
                    **where,
                },
                {
                    "id": f"r{i}",
                    "role": "assistant",
                    "content": f"heard {i}{BREAKERS}",
                    "reply_to": f"u{i}",
                    **where,
                },
            )
        )
        lines, _ = parse_transcript(transcript)
        await runtime.importer.import_lines(
            lines, personality_id=personality.id, personality_user_id="bot", default_user_id=None
        )
    memory_columns = "personality_id, user_id, guild_id, channel_id, is_dm, content, source_message_ids"

    async def memories() -> list[tuple[Any, ...]]:
        async with runtime.sessionmaker() as session:
            rows = await session.execute(text(f"SELECT {memory_columns} FROM memories ORDER BY content"))
            return [tuple(row) for row in rows]

    before = await memories()
    assert len(before) == 6 and {row[0] for row in before} == {lilith.id, sage.id}
    exported = await runtime.user_settings.export_lines(user_id="A")
    assert all(line.splitlines() == [line] for line in exported)

    async with runtime.sessionmaker.begin() as session:  # a fresh deployment's log and memories
        await session.execute(text("DELETE FROM memories"))
        await session.execute(text("DELETE FROM conversations"))
    lines, _ = parse_transcript("\n".join(exported))
    report = await runtime.importer.import_lines(lines, default_user_id=None)
    assert (report.messages_new, report.formation.memories) == (12, 6)
    assert await memories() == before
