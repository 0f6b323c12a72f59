from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.runtime import Runtime
from memory.errors import InvalidInputError
from memory.formation.mode import effective_mode
from memory.llm import LLMClient
from memory.owners.personalities import PersonalityService
from memory.owners.user_settings import UserSettingsService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder
from memory.transfer.transcript import parse_transcript
from models import UserSettings
from testkit.memory_service import add_chat, add_personality, make_service


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


async def test_an_export_imports_back_with_its_reply_links(runtime: Runtime) -> None:
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
    await runtime.transfer.import_transcript(
        lines, personality=lilith, default_user_id=None, skipped_lines=skipped
    )
    await runtime.personas.set("A", name="Alice", pronouns="she/her")
    exported = [json.loads(line) for line in await runtime.transfer.export_lines(user_id="A")]
    assert exported[0]["persona"]["name"] == "Alice"  # the export opens with who the user is
    assert [(r["id"], r.get("reply_to")) for r in exported if "id" in r] == [("1", None), ("3", "1")]

    # Imported again for another personality, the links hold: Alice's reply stays Alice's.
    sage, _ = await runtime.personalities.create("Sage")
    again, skipped = parse_transcript("\n".join(json.dumps(r) for r in exported))
    await runtime.transfer.import_transcript(
        again, personality=sage, default_user_id=None, skipped_lines=skipped
    )
    reimported = [json.loads(line) for line in await runtime.transfer.export_lines(user_id="A")]
    assert [
        (r["id"], r.get("reply_to"))
        for r in reimported
        if "memory" in r and r["memory"]["personality"] == "sage"
    ] == [("3", "1")]


async def test_fresh_mode_with_all_personalities_or_one_and_its_exceptions(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    personalities = PersonalityService(sessionmaker)
    sage, _ = await personalities.create("Sage")
    lilith, _ = await personalities.create("Lilith")
    service = UserSettingsService(sessionmaker)
    assert not await service.is_fresh("1", sage.id)

    assert await service.set_fresh("1", True, sage.id)
    assert (await service.is_fresh("1", sage.id), await service.is_fresh("1", lilith.id)) == (True, False)
    assert not await service.is_fresh("2", sage.id)  # one user's setting only
    # On with all, off with one: that one is an exception.
    assert await service.set_fresh("1", True)
    assert not await service.set_fresh("1", False, lilith.id)
    assert (await service.is_fresh("1", sage.id), await service.is_fresh("1", lilith.id)) == (True, False)
    # Off with all ends it everywhere, single personalities' settings included.
    assert not await service.set_fresh("1", False)
    assert (await service.is_fresh("1", sage.id), await service.is_fresh("1", lilith.id)) == (False, False)
    general = await service.get("1")
    assert general is not None and general.fresh is None  # the status shows it from this row


async def test_in_fresh_mode_a_reply_recalls_nothing_and_memories_still_form(
    sessionmaker: async_sessionmaker[AsyncSession], embedder: Embedder, tmp_path: Path
) -> None:
    index = EdgeVectorIndex(tmp_path / "qdrant")
    try:
        memory = make_service(sessionmaker, index, embedder, LLMClient(), None)
        sage = await add_personality(sessionmaker, "Sage")
        await add_chat(
            sessionmaker, sage, [("user", "My dog Biscuit turns 4 on May 12"), ("assistant", "Yay!")]
        )
        settings = UserSettingsService(sessionmaker)
        await settings.set_fresh("u1", True, sage.id)
        assert (await memory.form_pending()).memories == 1  # still formed
        question: dict[str, Any] = {
            "personality_id": sage.id,
            "user_id": "u1",
            "query": "When is Biscuit's birthday?",
        }
        assert await memory.recall(**question, for_reply=True) == []
        assert len(await memory.recall(**question)) == 1  # the user's own search still finds it
        assert await memory.recall(**question, for_reply=True) == []  # read as well once names are kept
        await settings.set_fresh("u1", False, sage.id)
        assert len(await memory.recall(**question, for_reply=True)) == 1
    finally:
        await index.close()


BREAKERS = "\u2028\u2029\u0085"


async def test_a_whole_account_export_restores_each_memory_to_its_own_personality(runtime: Runtime) -> None:
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
        await runtime.transfer.import_transcript(lines, personality=personality, default_user_id=None)
    memory_columns = "personality_id, user_id, guild_id, channel_id, is_dm, content, source_message_ids"

    async def memories() -> list[tuple[Any, ...]]:
        async with runtime.sessionmaker() as session:
            rows = await session.execute(text(f"SELECT {memory_columns} FROM memories ORDER BY content"))
            return [tuple(row) for row in rows]

    before = await memories()
    assert len(before) == 6 and {row[0] for row in before} == {lilith.id, sage.id}
    exported = await runtime.transfer.export_lines(user_id="A")
    assert all(line.splitlines() == [line] for line in exported)

    async with runtime.sessionmaker.begin() as session:  # a fresh deployment's log and memories
        await session.execute(text("DELETE FROM memories"))
        await session.execute(text("DELETE FROM conversations"))
    lines, _ = parse_transcript("\n".join(exported))
    report = await runtime.transfer.import_transcript(lines, default_user_id=None)
    assert (report.messages_new, report.formation.memories) == (12, 6)
    assert await memories() == before
