"""/memory through the real command tree: each user sees, exports and deletes only their own memories."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import func, select, update

from bot.runtime import Runtime
from memory.conversations import Venue, find_conversation
from memory.transfer.transcript import parse_transcript
from models import Conversation, Memory, Personality, Summary, UserSettings
from testkit.fake_discord import FakeDiscord
from tests.bot.memory.pages import whole_ids
from tests.bot.seeding import seed_memories

ALICE = 201
BOB = 202
OWNER = 101
GUILD = 300


@pytest.fixture
async def sage(runtime: Runtime) -> Personality:
    personality, _ = await runtime.personalities.create("Sage", owner_id=str(OWNER))
    return personality


async def live_memories(runtime: Runtime, user_id: int) -> list[Memory]:
    async with runtime.sessionmaker() as session:
        return list(
            (
                await session.scalars(
                    select(Memory).where(Memory.user_id == str(user_id), Memory.state != "deleted")
                )
            ).all()
        )


async def test_status_shows_mode_source_model_and_storage(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    assert await seed_memories(runtime, sage, str(ALICE)) == 3
    status = await fake_discord.command("memory status", user=ALICE, personality="sage")
    assert status.reply.ephemeral
    text = status.text
    assert "Memory: on (set by personality)" in text
    assert "Stored as: verbatim (set by personality)" in text
    assert "Summarizer model: openai/test-summarizer" in text
    assert "Memories: 3" in text
    assert "Storage:" in text and "saving" in text
    assert "Pending: 0 messages" in text
    assert "Incognito: off" in text
    # Bob has none, and sees none of Alice's.
    assert "Memories: 0" in (await fake_discord.command("memory status", user=BOB, personality="sage")).text
    overall = await fake_discord.command("memory status", user=ALICE)
    assert "**All personalities**" in overall.text and "Memories: 3" in overall.text


async def test_settings_summarization_is_the_users_and_shows_in_status(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    saved = await fake_discord.command(
        "memory settings", user=ALICE, summarization="enabled", personality="sage"
    )
    assert saved.reply.ephemeral and "summarization enabled" in saved.text
    async with runtime.sessionmaker() as session:
        row = await session.scalar(select(UserSettings).where(UserSettings.user_id == str(ALICE)))
    assert row is not None and (row.personality_id, row.summarization, row.memory_enabled) == (
        sage.id,
        "enabled",
        None,
    )
    status = await fake_discord.command("memory status", user=ALICE, personality="sage")
    assert "Stored as: summarized (set by user (this personality))" in status.text
    shown = await fake_discord.command("memory settings", user=ALICE, personality="sage")
    assert "memory inherited, summarization enabled" in shown.text
    # A global setting is a separate row; the per-personality one still wins for Sage.
    await fake_discord.command("memory settings", user=ALICE, summarization="disabled")
    status = await fake_discord.command("memory status", user=ALICE, personality="sage")
    assert "Stored as: summarized (set by user (this personality))" in status.text


async def test_memory_off_stops_new_memories_and_offers_deletion(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    await seed_memories(runtime, sage, str(ALICE))
    await seed_memories(runtime, sage, str(BOB))
    off = await fake_discord.command("memory settings", user=ALICE, memory="off")
    assert off.reply.ephemeral
    assert "Delete the 3 memories already kept with every personality?" in off.text
    assert await seed_memories(runtime, sage, str(ALICE), prefix="later") == 0  # stopped at once
    await fake_discord.click(off.reply, "Delete them", user=ALICE)
    assert "Deleted 3 memories" in off.reply.content
    assert await live_memories(runtime, ALICE) == []
    assert len(await live_memories(runtime, BOB)) == 3
    status = await fake_discord.command("memory status", user=ALICE, personality="sage")
    assert "Memory: off (set by user)" in status.text


async def test_search_returns_own_memories_with_ids(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    await seed_memories(runtime, sage, str(ALICE))
    await seed_memories(runtime, sage, str(BOB), exchanges=(("My dog is called Rex.", "Rex, nice."),))
    found = await fake_discord.command(
        "memory search", user=ALICE, query="what is my dog called", personality="sage"
    )
    assert found.reply.ephemeral
    ids = {str(m.id) for m in await live_memories(runtime, ALICE)}
    assert "Biscuit" in found.text
    assert "Rex" not in found.text
    assert any(f"`{i[:8]}" in found.text for i in ids)
    assert "2024-03-10" in found.text
    everywhere = await fake_discord.command("memory search", user=ALICE, query="Lisbon job")
    assert "Lisbon" in everywhere.text and "Sage" in everywhere.text
    nothing = await fake_discord.command("memory search", user=BOB, query="Lisbon", personality="sage")
    assert "Lisbon in March" not in nothing.text


async def test_forget_one_never_comes_back(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    await seed_memories(runtime, sage, str(ALICE))
    memory = runtime.memory
    [dog] = [m for m in await live_memories(runtime, ALICE) if "Biscuit" in m.content]
    # Bob can't forget Alice's memory.
    refused = await fake_discord.command("memory forget", user=BOB, memory=str(dog.id))
    assert f"You have no memory with id {dog.id}" in refused.text
    done = await fake_discord.command("memory forget", user=ALICE, memory=str(dog.id), personality="sage")
    assert done.reply.ephemeral and "Forgotten" in done.text
    recalled = await memory.recall(
        personality_id=sage.id, user_id=str(ALICE), query="dog Biscuit beach", limit=5
    )
    assert dog.id not in {m.id for m in recalled}
    assert dog.id not in await memory._store.index.ids(sage.id)
    assert len(await live_memories(runtime, ALICE)) == 2
    bad = await fake_discord.command("memory forget", user=ALICE, memory="not-an-id")
    assert "is not a memory id" in bad.text


async def test_forget_all_asks_first(fake_discord: FakeDiscord, runtime: Runtime, sage: Personality) -> None:
    await seed_memories(runtime, sage, str(ALICE))
    await seed_memories(runtime, sage, str(BOB))
    asked = await fake_discord.command("memory forget", user=ALICE, memory="all", personality="sage")
    assert "Delete all 3 of your memories with **Sage**?" in asked.text
    assert len(await live_memories(runtime, ALICE)) == 3
    await fake_discord.click(asked.reply, "Delete", user=ALICE)
    assert "Deleted 3 memories" in asked.reply.content
    assert await live_memories(runtime, ALICE) == []
    assert len(await live_memories(runtime, BOB)) == 3
    assert await runtime.memory._store.index.ids(sage.id) == {m.id for m in await live_memories(runtime, BOB)}
    none_left = await fake_discord.command("memory forget", user=ALICE, memory="all")
    assert "You have no memories" in none_left.text


async def test_export_is_importable_jsonl_of_own_memories(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    await seed_memories(runtime, sage, str(ALICE))
    await seed_memories(runtime, sage, str(BOB))
    exported = await fake_discord.command("memory export", user=ALICE, personality="sage")
    reply = exported.reply
    assert reply.ephemeral
    [attachment] = reply.attachments
    assert attachment.filename == "personae-memories-sage.jsonl"
    text = attachment.data.decode()
    lines, skipped = parse_transcript(text)  # the importer's own parser accepts it
    assert skipped == 0 and len(lines) == 6
    assert {line.user_id for line in lines if line.role == "user"} == {str(ALICE)}
    records = [json.loads(r) for r in text.splitlines()]
    memories = [r["memory"] for r in records if "memory" in r]
    assert len(memories) == 3
    assert {m["personality"] for m in memories} == {"sage"}
    assert all(m["mode"] == "verbatim" and m["source_message_ids"] for m in memories)
    empty = await fake_discord.command("memory export", user=OWNER)
    assert "no memories to export" in empty.text


async def test_reset_clears_the_rolling_summary_and_title_here(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    await seed_memories(runtime, sage, str(ALICE), guild_id=str(GUILD), channel_id="501")
    async with runtime.sessionmaker.begin() as session:
        conversation = await find_conversation(session, sage.id, Venue(str(GUILD), "501", str(ALICE)))
        assert conversation is not None
        session.add(
            Summary(
                conversation_id=conversation.id,
                content="They talked about Biscuit.",
                token_count=5,
                first_message_id=1,
                last_message_id=2,
                message_count=2,
                summarizer="extractive",
            )
        )
    async with runtime.sessionmaker.begin() as session:
        await session.execute(
            update(Conversation)
            .where(Conversation.id == conversation.id)
            .values(title="Biscuit's beach days")
        )
    status = await fake_discord.command(
        "memory status", user=ALICE, guild=GUILD, channel=501, personality="sage"
    )
    assert "Conversation here: Biscuit's beach days" in status.text
    elsewhere = await fake_discord.command(
        "memory reset", user=ALICE, guild=GUILD, channel=999, personality="sage"
    )
    assert "nothing to clear" in elsewhere.text
    reset = await fake_discord.command(
        "memory reset", user=ALICE, guild=GUILD, channel=501, personality="sage"
    )
    assert reset.reply.ephemeral and "Cleared the conversation summary of **Sage** here" in reset.text
    async with runtime.sessionmaker() as session:
        assert await session.scalar(select(func.count(Summary.id))) == 0
    assert len(await live_memories(runtime, ALICE)) == 3  # long-term memories untouched
    status = await fake_discord.command(
        "memory status", user=ALICE, guild=GUILD, channel=501, personality="sage"
    )
    assert "Conversation here:" not in status.text  # the one reset clears the title too
    unnamed = await fake_discord.command("memory reset", user=ALICE, guild=GUILD, channel=501)
    assert "Name the personality" in unnamed.text


async def test_unknown_personality_and_bad_choice(fake_discord: FakeDiscord) -> None:
    cases: tuple[tuple[str, dict[str, Any]], ...] = (
        ("memory status", {}),
        ("memory search", {"query": "x"}),
        ("memory export", {}),
        ("memory forget", {"memory": "all"}),
        ("memory settings", {"memory": "on"}),
        ("memory incognito", {"state": "on"}),
    )
    for path, options in cases:
        reply = await fake_discord.command(path, user=ALICE, personality="nobody", **options)
        assert reply.reply.ephemeral
        assert "No personality named 'nobody'" in reply.text, path
    bad = await fake_discord.command("memory settings", user=ALICE, summarization="sometimes")
    assert bad.reply.ephemeral
    assert "summarization" in bad.text.lower(), bad.text


async def test_each_search_hit_shows_its_own_words_beside_its_id(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    """A hit recalled with its neighbouring exchanges shows, beside its id, only what it holds itself: a
    user picks the right memory to forget (issue 20, 6)."""
    await seed_memories(
        runtime,
        sage,
        str(ALICE),
        exchanges=(
            ("I moved to Porto in May.", "Porto, lovely."),
            ("My dog is called Biscuit.", "Biscuit, sweet."),
            ("I bake sourdough on Sundays.", "Sourdough, nice."),
        ),
    )
    found = await fake_discord.command("memory search", user=ALICE, query="Biscuit", personality="sage")
    own = {str(m.id): m.content for m in await live_memories(runtime, ALICE)}
    shown = [line for line in found.text.splitlines() if line.startswith("`")]
    assert shown and "Biscuit" in shown[0]
    for line in shown:
        [memory_id] = whole_ids([line[1 : line.index("`", 1)]], own)
        words = line.split(": ", 1)[1].rstrip("…").strip()
        assert own[memory_id].startswith(words[:20]), (line, own[memory_id])
