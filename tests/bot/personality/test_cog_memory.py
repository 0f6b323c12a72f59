"""/personality's memory commands through the real command tree: summarization and its mode, the
summarizer's model and prompt, re-summarizing, and the storage figures its managers see."""

from __future__ import annotations

from sqlalchemy import select

from bot.runtime import Runtime
from memory.owners.personality_fields import MAX_SUMMARIZER_PROMPT_LENGTH
from models import LLMConfig, Memory, Personality, SystemPrompt
from testkit.fake_discord import FakeDiscord
from tests.bot.personality.commands import OTHER, OWNER, create, stored
from tests.bot.seeding import seed_memories


async def test_memory_summarization_explains_the_change(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    await create(fake_discord, "Lilith")
    on = await fake_discord.command(
        "personality memory", user=OWNER, personality="lilith", summarization="enabled", mode="hybrid"
    )
    assert "now stores new memories hybrid" in on.text
    assert "Existing memories stay as they are until you run `/personality resummarize`" in on.text
    row = await stored(runtime, "lilith")
    assert row is not None and row.memory_mode == "hybrid"
    off = await fake_discord.command(
        "personality memory", user=OWNER, personality="lilith", summarization="disabled"
    )
    assert "verbatim" in off.text
    row = await stored(runtime, "lilith")
    assert row is not None and row.memory_mode == "verbatim"
    bad = await fake_discord.command(
        "personality memory", user=OWNER, personality="lilith", summarization="enabled", mode="sometimes"
    )
    assert bad.reply.ephemeral
    row = await stored(runtime, "lilith")
    assert row is not None and row.memory_mode == "verbatim"


async def test_summarizer_model_by_config_allow_list_or_refusal(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    await create(fake_discord, "Lilith")
    config = await runtime.llm_configs.add(
        "cheap", model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key_env="CHEAP_KEY"
    )
    by_config = await fake_discord.command(
        "personality summarizer-model", user=OWNER, personality="lilith", model="cheap"
    )
    assert "config `cheap`" in by_config.text
    row = await stored(runtime, "lilith")
    assert row is not None and (row.summarizer_llm_config_id, row.summarizer_model) == (config.id, None)

    by_string = await fake_discord.command(
        "personality summarizer-model", user=OWNER, personality="lilith", model="ollama/llama3.1"
    )
    assert "`ollama/llama3.1`" in by_string.text
    row = await stored(runtime, "lilith")
    assert row is not None and (row.summarizer_llm_config_id, row.summarizer_model) == (
        None,
        "ollama/llama3.1",
    )

    refused = await fake_discord.command(
        "personality summarizer-model", user=OWNER, personality="lilith", model="anthropic/claude-3-haiku"
    )
    assert "config cheap" in refused.text and "model ollama/*" in refused.text
    unknown = await fake_discord.command(
        "personality summarizer-model", user=OWNER, personality="lilith", model="madeup/model"
    )
    assert "Unknown LLM provider" in unknown.text
    row = await stored(runtime, "lilith")
    assert row is not None and row.summarizer_model == "ollama/llama3.1"

    reset = await fake_discord.command(
        "personality summarizer-model", user=OWNER, personality="lilith", model="default"
    )
    assert "the bot's default" in reset.text
    row = await stored(runtime, "lilith")
    assert row is not None and (row.summarizer_llm_config_id, row.summarizer_model) == (None, None)
    async with runtime.sessionmaker() as session:
        assert await session.scalar(select(LLMConfig.name)) == "cheap"


async def test_summarizer_prompt_modal_saves_and_resets(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    await create(fake_discord, "Lilith")
    opened = await fake_discord.command("personality summarizer-prompt", user=OWNER, personality="lilith")
    modal = opened.modal
    text_input = modal["components"][0]["components"][0]
    assert text_input.get("value") in (None, "")
    saved = await fake_discord.submit_modal(modal, {text_input["custom_id"]: "Keep the jokes."}, user=OWNER)
    assert saved.reply.ephemeral and "Saved **Lilith**'s summarizer prompt" in saved.text
    async with runtime.sessionmaker() as session:
        prompt = await session.scalar(select(SystemPrompt))
    assert prompt is not None and (prompt.prompt_type, prompt.content) == ("summarizer", "Keep the jokes.")

    reopened = await fake_discord.command("personality summarizer-prompt", user=OWNER, personality="lilith")
    assert reopened.modal["components"][0]["components"][0]["value"] == "Keep the jokes."
    too_long = await fake_discord.submit_modal(
        reopened.modal, {text_input["custom_id"]: "y" * (MAX_SUMMARIZER_PROMPT_LENGTH + 1)}, user=OWNER
    )
    assert "limit is 4000" in too_long.text
    cleared = await fake_discord.submit_modal(reopened.modal, {text_input["custom_id"]: "  "}, user=OWNER)
    assert "default summarizer prompt again" in cleared.text
    async with runtime.sessionmaker() as session:
        assert await session.scalar(select(SystemPrompt)) is None
        row = await session.scalar(select(Personality))
    assert row is not None and row.summarizer_prompt_id is None


async def test_resummarize_runs_in_background_with_progress(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    await create(fake_discord, "Sage")
    sage = await stored(runtime, "sage")
    assert sage is not None
    assert await seed_memories(runtime, sage, "201") == 3
    refused = await fake_discord.command("personality resummarize", user=OWNER, personality="sage")
    assert "stores memories verbatim" in refused.text  # summarization must be on first
    await fake_discord.command("personality memory", user=OWNER, personality="sage", summarization="enabled")
    run = await fake_discord.command("personality resummarize", user=OWNER, personality="sage")
    reply = run.reply
    assert reply.ephemeral
    assert reply.edits >= 2  # "0 of 3", progress, then the result
    assert "Re-summarized 3 of 3 memories of Sage" in reply.content
    async with runtime.sessionmaker() as session:
        memories = (await session.scalars(select(Memory).where(Memory.personality_id == sage.id))).all()
    assert len(memories) == 3
    assert all(m.summarized and m.mode == "summarized" for m in memories)


async def test_info_shows_storage_to_its_managers_only(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    await create(fake_discord, "Sage")
    await fake_discord.command("personality memory", user=OWNER, personality="sage", summarization="enabled")
    sage = await stored(runtime, "sage")
    assert sage is not None
    long_exchanges = (
        (
            "*flops onto the sofa* okay so honestly it has been such a long and tiring and strange week, "
            "you would not believe how much running around there was, boxes everywhere, tape everywhere, "
            "and in the middle of all of it my sister Margot finally moved to Lisbon!!! 😭😭",
            "Oh, that sounds like a very long and very tiring week indeed, with all those boxes and all "
            "that tape, but how lovely that Margot finally made it to Lisbon after all of that.",
        ),
    )
    assert await seed_memories(runtime, sage, "201", exchanges=long_exchanges) == 1

    owner = (await fake_discord.command("personality info", user=OWNER, personality="sage")).text
    assert "Memories: 1" in owner and "Storage:" in owner
    assert "Summaries:" not in owner  # the summarizer model made it: nothing fell back
    other = (await fake_discord.command("personality info", user=OTHER, personality="sage")).text
    assert "Storage:" not in other and "Summaries:" not in other
