"""/personality through the real command tree: creating, showing, editing, deleting and activating a
personality, and who may; real interactions, real services, captured HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from discord import app_commands
from sqlalchemy import select

from bot.runtime import Runtime
from memory.owners.personality_fields import MAX_PROMPT_LENGTH
from models import ChannelBinding, Memory
from testkit.fake_discord import FakeDiscord
from tests.bot.personality.commands import ADMIN, GUILD, MANAGE_CHANNELS, OTHER, OWNER, create, stored
from tests.bot.seeding import seed_memories


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
