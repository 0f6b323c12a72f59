"""/personality through the real command tree: real interactions, real services, captured HTTP."""

from __future__ import annotations

from typing import Any

import discord
import pytest
from discord import app_commands
from sqlalchemy import select

from bot.runtime import Runtime
from memory.owners.personality_fields import MAX_PROMPT_LENGTH, MAX_SUMMARIZER_PROMPT_LENGTH
from models import ChannelBinding, LLMConfig, Memory, Personality, SystemPrompt
from testkit.fake_discord import FakeDiscord, Invocation
from tests.bot.seeding import seed_memories

MANAGE_CHANNELS = discord.Permissions(manage_channels=True).value
OWNER = 101
OTHER = 102
ADMIN = 900
GUILD = 300


async def create(
    fake_discord: FakeDiscord, name: str = "Lilith", user: int = OWNER, **extra: Any
) -> Invocation:
    return await fake_discord.command(
        "personality create",
        user=user,
        name=name,
        display_name=extra.pop("display_name", name),
        prompt=extra.pop("prompt", f"You are {name}."),
        **extra,
    )


async def stored(runtime: Runtime, name: str) -> Personality | None:
    async with runtime.sessionmaker() as session:
        return await session.scalar(select(Personality).where(Personality.name == name))


async def test_create_then_info_list_edit(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    created = await create(
        fake_discord, "Lilith", avatar="https://img.example/lilith.png", model="openai/gpt-4o-mini"
    )
    assert created.reply.ephemeral
    assert "Created **Lilith** (`lilith`)" in created.text
    row = await stored(runtime, "lilith")
    assert row is not None
    assert row.owner_id == str(OWNER)
    assert row.chat_model == "openai/gpt-4o-mini"
    assert row.avatar_url == "https://img.example/lilith.png"

    info = await fake_discord.command("personality info", user=OTHER, personality="lilith")
    assert info.reply.ephemeral
    assert "Owner: <@101>" in info.text
    assert "Prompt:" not in info.text  # only the owner sees the prompt
    assert (
        "Prompt: You are Lilith."
        in (await fake_discord.command("personality info", user=OWNER, personality="lilith")).text
    )

    listed = await fake_discord.command("personality list", user=OWNER)
    assert "**Lilith** (`lilith`), memory verbatim (yours)" in listed.text

    edited = await fake_discord.command(
        "personality edit",
        user=OWNER,
        personality="lilith",
        display_name="Lilith the Wise",
        prompt="Be wise.",
    )
    assert "Updated." in edited.text
    row = await stored(runtime, "lilith")
    assert row is not None
    assert (row.display_name, row.system_prompt) == ("Lilith the Wise", "Be wise.")


async def test_non_owner_is_refused_everywhere(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    await create(fake_discord, "Lilith")
    refusals = [
        await fake_discord.command("personality edit", user=OTHER, personality="lilith", prompt="Hacked"),
        await fake_discord.command("personality delete", user=OTHER, personality="lilith"),
        await fake_discord.command(
            "personality memory", user=OTHER, personality="lilith", summarization="enabled"
        ),
        await fake_discord.command(
            "personality summarizer-model", user=OTHER, personality="lilith", model="openai/gpt-4o-mini"
        ),
        await fake_discord.command("personality summarizer-prompt", user=OTHER, personality="lilith"),
        await fake_discord.command("personality resummarize", user=OTHER, personality="lilith"),
    ]
    for invocation in refusals:
        assert invocation.reply.ephemeral
        assert "Only the owner of Lilith" in invocation.text
    no_permission = await fake_discord.command(
        "personality activate", user=OTHER, personality="lilith", guild=GUILD, channel=501
    )
    assert no_permission.reply.ephemeral and "Manage Channels" in no_permission.text
    row = await stored(runtime, "lilith")
    assert row is not None
    assert (row.system_prompt, row.memory_mode, row.summarizer_model) == ("You are Lilith.", "verbatim", None)


async def test_admin_may_change_any_personality(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    await create(fake_discord, "Lilith")
    reply = await fake_discord.command(
        "personality edit", user=ADMIN, personality="lilith", prompt="Admin edit"
    )
    assert "Updated." in reply.text
    row = await stored(runtime, "lilith")
    assert row is not None and row.system_prompt == "Admin edit"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "!!!"}, "no letters or digits"),
        ({"model": "nosuchprovider/model-x"}, "Unknown LLM provider"),
        ({"model": "anthropic/claude-3-haiku"}, "is not allowed here. Use one of:"),
        ({"avatar": "http://insecure.example/a.png"}, "https:// image URL"),
    ],
    ids=["bad-name", "unknown-provider", "not-allowed", "bad-avatar"],
)
async def test_create_bad_values_are_explained(
    fake_discord: FakeDiscord, runtime: Runtime, options: dict[str, Any], message: str
) -> None:
    name = options.pop("name", "Lilith")
    reply = await create(fake_discord, name, **options)
    assert reply.reply.ephemeral
    assert message in reply.text
    assert await runtime.personalities.list() == []


async def test_create_taken_name_and_over_long_prompt(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    await create(fake_discord, "Lilith")
    again = await create(fake_discord, "lilith", user=OTHER)
    assert "already exists" in again.text
    row = await stored(runtime, "lilith")
    assert row is not None and row.owner_id == str(OWNER)
    # Discord caps the option at MAX_PROMPT_LENGTH client-side; the service checks the limit too.
    too_long = await fake_discord.command(
        "personality edit", user=OWNER, personality="lilith", prompt="x" * (MAX_PROMPT_LENGTH + 1)
    )
    assert too_long.reply.ephemeral
    assert f"the limit is {MAX_PROMPT_LENGTH}" in too_long.text
    row = await stored(runtime, "lilith")
    assert row is not None and row.system_prompt == "You are Lilith."


async def test_unknown_personality_is_named(fake_discord: FakeDiscord) -> None:
    reply = await fake_discord.command("personality info", user=OWNER, personality="nobody")
    assert reply.reply.ephemeral
    assert "No personality named 'nobody'" in reply.text


async def test_autocomplete_matches_prefix(fake_discord: FakeDiscord) -> None:
    for name in ("Lilith", "Lila", "Sage"):
        await create(fake_discord, name)
    result = await fake_discord.autocomplete("personality info", "personality", user=OTHER, personality="li")
    assert [c["value"] for c in result.choices] == ["lila", "lilith"]
    everything = await fake_discord.autocomplete(
        "personality info", "personality", user=OTHER, personality=""
    )
    assert len(everything.choices) == 3


async def test_delete_asks_then_deletes(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    await create(fake_discord, "Lilith")
    lilith = await stored(runtime, "lilith")
    assert lilith is not None
    assert await seed_memories(runtime, lilith, "201") == 3
    index = runtime.memory._store.index
    assert len(await index.ids(lilith.id)) == 3
    asked = await fake_discord.command("personality delete", user=OWNER, personality="lilith")
    assert asked.reply.ephemeral
    assert [b["label"] for b in asked.reply.buttons] == ["Delete", "Cancel"]
    # Someone else can't press it.
    stranger = await fake_discord.click(asked.reply, "Delete", user=OTHER)
    assert "not yours" in stranger.text
    assert await stored(runtime, "lilith") is not None
    await fake_discord.click(asked.reply, "Delete", user=OWNER)
    assert "Deleted **Lilith**" in asked.reply.content
    assert asked.reply.buttons == []
    assert await stored(runtime, "lilith") is None
    async with runtime.sessionmaker() as session:
        assert (await session.scalars(select(Memory))).all() == []
    assert await index.ids(lilith.id) == set()


async def test_delete_cancelled_keeps_it(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    await create(fake_discord, "Lilith")
    asked = await fake_discord.command("personality delete", user=OWNER, personality="lilith")
    await fake_discord.click(asked.reply, "Cancel", user=OWNER)
    assert "Cancelled" in asked.reply.content
    assert await stored(runtime, "lilith") is not None


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


async def test_activate_needs_manage_channels_in_guilds(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    await create(fake_discord, "Lilith")
    refused = await fake_discord.command(
        "personality activate", user=OTHER, guild=GUILD, channel=501, personality="lilith"
    )
    assert "Manage Channels" in refused.text
    done = await fake_discord.command(
        "personality activate",
        user=OTHER,
        guild=GUILD,
        channel=501,
        permissions=MANAGE_CHANNELS,
        personality="lilith",
    )
    assert not done.reply.ephemeral  # meant to be seen by the channel
    assert "now answers every message here" in done.text
    async with runtime.sessionmaker() as session:
        binding = await session.scalar(select(ChannelBinding))
    assert binding is not None and (binding.channel_id, binding.guild_id) == ("501", str(GUILD))
    again = await fake_discord.command(
        "personality activate",
        user=OTHER,
        guild=GUILD,
        channel=501,
        permissions=MANAGE_CHANNELS,
        personality="lilith",
    )
    assert again.reply.ephemeral and "already answers" in again.text
    off = await fake_discord.command(
        "personality deactivate",
        user=OTHER,
        guild=GUILD,
        channel=501,
        permissions=MANAGE_CHANNELS,
        personality="lilith",
    )
    assert "no longer answers" in off.text
    async with runtime.sessionmaker() as session:
        assert await session.scalar(select(ChannelBinding)) is None


async def test_any_user_chooses_a_personality_in_their_own_dm(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    await create(fake_discord, "Lilith")
    chosen = await fake_discord.command("personality activate", user=OTHER, channel=601, personality="lilith")
    assert "now answers" in chosen.text
    assert [p.name for p in await runtime.bindings.bound_personalities(["601"])] == ["lilith"]
    left = await fake_discord.command("personality deactivate", user=OTHER, channel=601, personality="lilith")
    assert "no longer answers" in left.text
    assert await runtime.bindings.bound_personalities(["601"]) == []


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


async def test_the_prompt_limit_is_one_for_the_slash_options_and_the_service(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    group = fake_discord.bot.tree.get_command("personality")
    assert isinstance(group, app_commands.Group)
    for name in ("create", "edit"):
        command = group.get_command(name)
        assert isinstance(command, app_commands.Command)
        prompt = next(p for p in command.parameters if p.name == "prompt")
        # What Discord lets a user type is what the service accepts; 6000 is Discord's cap for an option.
        assert prompt.max_value == MAX_PROMPT_LENGTH <= 6000, name
    created = await create(fake_discord, "Lilith", prompt="x" * MAX_PROMPT_LENGTH)
    assert "Created **Lilith**" in created.text
    row = await stored(runtime, "lilith")
    assert row is not None and len(row.system_prompt) == MAX_PROMPT_LENGTH


async def test_an_error_on_an_expired_interaction_is_logged_not_raised(
    fake_discord: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    # The first response came after Discord's 3 s: every answer the error handler tries gets a 404.
    unknown = await fake_discord.command("personality info", user=OWNER, personality="nobody", expired=True)
    assert unknown.replies == []
    failing = await fake_discord.command("personality list", user=OWNER, expired=True)
    assert failing.replies == []
    reported = [r.getMessage() for r in caplog.records if "Could not report an error" in r.getMessage()]
    assert len(reported) == 2
    assert all("Unknown interaction" in message for message in reported)


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
