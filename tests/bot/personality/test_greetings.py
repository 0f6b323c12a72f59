"""A character's greeting on Discord: posted as the personality when it is activated in a channel and
before its first answer in a DM, stored once as the conversation's first message, pinging nobody."""

from __future__ import annotations

import json
from typing import Any

import discord

from bot.runtime import Runtime
from memory.owners.cards import create_from_card, parse_card
from models import Personality
from testkit.fake_discord import CHANNEL, GUILD, PLAIN_CHANNEL, FakeDiscord
from testkit.llm_server import LLMTestServer
from tests.bot.state import rows
from tests.memory.owners.cards import SERAPHINA_V2, with_data

MANAGE_CHANNELS = discord.Permissions(manage_channels=True).value
ANN = 201
GREETING = "*Seraphina smiles* You're awake, Ann."  # in Ann's DM, where she is called so
ACTIVATOR = "user201"  # Ann's name as slash commands give it in the fake Discord


async def seraphina(runtime: Runtime, **changes: Any) -> Personality:
    """Seraphina from her card, greeting with `first_mes` only (no alternate to choose at random)."""
    card = with_data(SERAPHINA_V2, alternate_greetings=[], **changes)
    imported = await create_from_card(
        runtime.personalities, parse_card(json.dumps(card).encode()), by_operator=True
    )
    return imported.personality


async def activate(fake_discord: FakeDiscord, channel: int = CHANNEL) -> str:
    done = await fake_discord.command(
        "personality activate",
        user=ANN,
        guild=GUILD,
        channel=channel,
        permissions=MANAGE_CHANNELS,
        personality="seraphina",
    )
    await fake_discord.settle()
    return done.text


async def test_activating_a_personality_greets_the_channel_once_as_the_personality(
    fake_discord: FakeDiscord, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    await seraphina(runtime)
    assert "now answers every message here" in await activate(fake_discord)
    greeted = GREETING.replace("Ann", ACTIVATOR)
    [greeting] = [m for m in fake_discord.sent_by_bot(CHANNEL) if m.webhook_id is not None]
    assert greeting.author["username"] == "Seraphina" and greeting.content == greeted
    [stored] = await rows(runtime)
    assert (stored.role, stored.content, stored.author_name) == ("assistant", greeted, "Seraphina")

    # Deactivated and activated again: the conversation has begun, so no second greeting.
    await fake_discord.command(
        "personality deactivate",
        user=ANN,
        guild=GUILD,
        permissions=MANAGE_CHANNELS,
        personality="seraphina",
    )
    await activate(fake_discord)
    assert [m.content for m in fake_discord.sent_by_bot(CHANNEL) if m.webhook_id] == [greeted]

    # The model sees the greeting as Seraphina's opening line, before the user's first message.
    llm_server.responder = lambda body: "Then rest a while."
    await fake_discord.say("Where am I?", user=ANN, name="Ann")
    [request] = llm_server.requests
    said = [(m["role"], m["content"]) for m in request["messages"] if m["role"] != "system"]
    assert said[-2][0] == "assistant" and greeted in said[-2][1]
    assert said[-1][0] == "user" and "Where am I?" in said[-1][1]
    assert [m.content for m in await rows(runtime)] == [greeted, "Where am I?", "Then rest a while."]


async def test_a_first_dm_is_greeted_before_the_first_answer_and_only_once(
    fake_discord: FakeDiscord, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    await seraphina(runtime)
    llm_server.responder = lambda body: "Rest, traveller."
    await fake_discord.say("Seraphina, hello?", user=ANN, name="Ann", dm=True)
    dm = fake_discord.dm_channel(ANN)
    assert [m.content for m in fake_discord.sent_by_bot(dm)] == [
        f"**Seraphina**\n{GREETING}",
        "**Seraphina**\nRest, traveller.",
    ]
    await fake_discord.say("Seraphina, and now?", user=ANN, name="Ann", dm=True)
    assert len(fake_discord.sent_by_bot(dm)) == 3  # the second answer, no second greeting
    assert [(m.role, m.content) for m in await rows(runtime)] == [
        ("assistant", GREETING),
        ("user", "Seraphina, hello?"),
        ("assistant", "Rest, traveller."),
        ("user", "Seraphina, and now?"),
        ("assistant", "Rest, traveller."),
    ]
    first_prompt = [m["role"] for m in llm_server.requests[0]["messages"] if m["role"] != "system"]
    assert first_prompt == ["assistant", "user"]


async def test_a_greeting_pings_nobody_and_a_card_without_one_greets_nobody(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    await seraphina(runtime, first_mes="@everyone <@123> wake up, {{user}}!")
    await activate(fake_discord, PLAIN_CHANNEL)
    [greeting] = fake_discord.sent_by_bot(PLAIN_CHANNEL)[1:]  # after the command's own reply
    assert greeting.content == f"**Seraphina**\n@everyone <@123> wake up, {ACTIVATOR}!"
    [sent] = [r.payload for r in fake_discord.requests if r.method == "POST" and r.path.endswith("/messages")]
    assert sent["allowed_mentions"] == {"parse": []}

    await runtime.personalities.create("Plain", prompt="You are Plain.")
    await fake_discord.command(
        "personality activate", user=ANN, guild=GUILD, permissions=MANAGE_CHANNELS, personality="plain"
    )
    await fake_discord.settle()
    assert [m.content for m in fake_discord.sent_by_bot(CHANNEL)] == [
        "**Plain** now answers every message here."  # the command's reply, and no greeting
    ]
    assert [m.content for m in await rows(runtime)] == [greeting.content.removeprefix("**Seraphina**\n")]


async def test_choosing_a_personality_in_a_dm_greets_there_and_its_first_answer_does_not_again(
    fake_discord: FakeDiscord, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    await seraphina(runtime)
    dm = fake_discord.dm_channel(ANN)
    chosen = await fake_discord.command("personality activate", user=ANN, personality="seraphina")
    await fake_discord.settle()
    assert "now answers" in chosen.text
    greeted = f"**Seraphina**\n{GREETING.replace('Ann', ACTIVATOR)}"
    assert [m.content for m in fake_discord.sent_by_bot(dm)][-1] == greeted
    llm_server.responder = lambda body: "Rest, traveller."
    await fake_discord.say("hello?", user=ANN, dm=True)
    assert [m.content for m in fake_discord.sent_by_bot(dm)][-2:] == [
        greeted,
        "**Seraphina**\nRest, traveller.",
    ]
    assert [m.role for m in await rows(runtime)] == ["assistant", "user", "assistant"]
