"""/persona through the real command tree, and the persona in what the personality is asked (the chat
LLM's requests), in what /memory export gives back, and in the /memory status line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.memory.texts import persona_status
from bot.runtime import Runtime
from memory.chat.prompt_persona import ELLIPSIS, PERSONA_HEADER
from memory.tokens import count_message_tokens
from models import Personality
from testkit.fake_discord import FakeDiscord
from testkit.llm_server import LLMTestServer
from tests.memory.chat.turns import chat_requests
from tests.memory.chat.windows import use_small_window

ALICE = 201
BOB = 202


@pytest.fixture
def personalities(lilith: Personality, sage: Personality) -> None:
    """Lilith and Sage, for the persona a personality knows a user by."""


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


async def test_set_show_and_clear(fake_discord: FakeDiscord, personalities: None, runtime: Runtime) -> None:
    command = fake_discord.command
    saved = await command(
        "persona set", user=ALICE, name="Alice", pronouns="she/her", about="A cartographer from Porto."
    )
    assert saved.reply.ephemeral
    assert saved.text == (
        "Saved. Your persona for every personality:\nName: Alice\nPronouns: she/her\n"
        "About: A cartographer from Porto."
    )
    sage_only = await command("persona set", user=ALICE, name="Captain Al", personality="sage")
    assert sage_only.text == "Saved. Your persona for **Sage**:\nName: Captain Al"

    shown = await command("persona show", user=ALICE)
    assert shown.text.startswith("Your persona for every personality:\nName: Alice")
    assert shown.text.endswith("For single personalities: **Captain Al** with Sage")
    assert (await command("persona show", user=ALICE, personality="sage")).text == (
        "Your persona for **Sage**:\nName: Captain Al"
    )
    falls_back = await command("persona show", user=ALICE, personality="lilith")
    assert falls_back.text.startswith(
        "You have no persona of your own for **Lilith**; it knows you by your global"
    )
    assert "Name: Alice" in falls_back.text
    # Bob has none, and sees none of Alice's.
    assert (await command("persona show", user=BOB)).text == (
        "You have no persona for every personality. Set one with `/persona set`."
    )

    cleared = await command("persona clear", user=ALICE, personality="sage")
    assert cleared.text == (
        "Cleared your persona for **Sage**. Sage will know you by your global persona, **Alice** (she/her)."
    )
    assert (await command("persona clear", user=ALICE)).text == "Cleared your persona for every personality."
    assert (await command("persona clear", user=ALICE)).text == (
        "You have no persona for every personality; nothing to clear."
    )
    assert await runtime.personas.all_of(str(ALICE)) == []


async def test_limits_are_clear_errors(
    fake_discord: FakeDiscord, personalities: None, runtime: Runtime
) -> None:
    command = fake_discord.command
    too_long = await command("persona set", user=ALICE, name="Alice", about="a" * 1001)
    assert too_long.reply.ephemeral
    assert too_long.text == "The about text can be at most 1,000 characters long (1,001 given)."
    assert (await command("persona set", user=ALICE, name="n" * 81)).text == (
        "The name can be at most 80 characters long (81 given)."
    )
    assert (await command("persona set", user=ALICE, name="Al", pronouns="p" * 41)).text == (
        "The pronouns can be at most 40 characters long (41 given)."
    )
    assert (await command("persona set", user=ALICE, name=" ")).text == "A persona needs a name."
    assert (await command("persona set", user=ALICE, name="Al", personality="nobody")).reply.ephemeral
    assert await runtime.personas.all_of(str(ALICE)) == []


async def test_the_personality_is_told_who_it_answers(
    fake_discord: FakeDiscord, personalities: None, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    command = fake_discord.command
    await command(
        "persona set", user=ALICE, name="Alice", pronouns="she/her", about="A cartographer from Porto."
    )
    await command("persona set", user=ALICE, name="Captain Al", about="Sails the Douro.", personality="sage")
    await command("persona set", user=BOB, name="Robert", pronouns="he/him", about="Bob's secret diary.")
    await fake_discord.say("Lilith, hello", user=BOB)
    await fake_discord.say("Lilith, any new maps?", user=ALICE)
    system = system_prompt(chat_requests(llm_server)[-1])
    assert f"{PERSONA_HEADER}\nAlice (she/her), who writes here as user{ALICE}." in system
    assert "About them: A cartographer from Porto." in system
    # In a shared channel the others speaking are named, never their "about".
    assert f"Others in this conversation: Robert (he/him), who writes here as user{BOB}." in system
    assert "secret diary" not in system
    # Bob's own answer carried his persona.
    assert "Robert (he/him)" in system_prompt(chat_requests(llm_server)[0]).split("Others")[0]
    # Sage knows Alice by the persona she gave Sage.
    await fake_discord.say("Sage, how is the garden?", user=ALICE)
    system = system_prompt(chat_requests(llm_server)[-1])
    assert "Captain Al, who writes here as" in system and "Sails the Douro." in system
    assert "cartographer" not in system


async def test_a_long_about_is_cut_within_its_share_of_a_small_window(
    fake_discord: FakeDiscord,
    personalities: None,
    runtime: Runtime,
    lilith: Personality,
    llm_server: LLMTestServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await use_small_window(runtime, lilith, llm_server, monkeypatch, window=1000)
    about = "I map rivers and name every bend after one of my aunts, from Ana to Zita. " * 13
    await fake_discord.command("persona set", user=ALICE, name="Alice", about=about[:1000])
    await fake_discord.say("Lilith, what do you know about me?", user=ALICE)
    request = chat_requests(llm_server)[-1]
    system = system_prompt(request)
    persona = system[system.index(PERSONA_HEADER) :]
    assert "About them: I map rivers" in persona and persona.endswith(ELLIPSIS)
    assert len(persona) < len(about) // 2
    # The whole prompt stays within its share of the window (75%), the persona within its 10% of that.
    assert count_message_tokens(request["messages"], "openai/test-chat") <= 750
    without = system[: system.index(PERSONA_HEADER) - 2]  # the block starts with a blank line
    added = count_message_tokens([{"role": "system", "content": system}], "openai/test-chat") - (
        count_message_tokens([{"role": "system", "content": without}], "openai/test-chat")
    )
    assert 50 < added <= 75


async def test_the_export_carries_the_persona(
    fake_discord: FakeDiscord, personalities: None, runtime: Runtime, sage: Personality
) -> None:
    await fake_discord.command("persona set", user=ALICE, name="Alice", pronouns="she/her")
    exported = await fake_discord.command("memory export", user=ALICE)
    [file] = exported.reply.attachments
    records = [json.loads(line) for line in file.data.decode().splitlines()]
    assert records == [
        {"persona": {"personality": None, "name": "Alice", "pronouns": "she/her", "about": None}}
    ]


async def test_the_status_line(runtime: Runtime, sage: Personality) -> None:
    assert persona_status(None) == "Persona: none (`/persona set` tells the personalities who you are)"
    general = await runtime.personas.set("1", name="Alice", pronouns="she/her", about="Maps " * 40)
    line = persona_status(general)
    assert line.startswith("Persona: **Alice** (she/her), set for every personality: Maps Maps")
    assert line.endswith("…") and len(line) < 160
    own = await runtime.personas.set("1", sage.id, name="Captain Al")
    assert persona_status(own) == "Persona: **Captain Al**, set for this personality"


async def test_memory_status_shows_the_persona_that_applies(
    fake_discord: FakeDiscord, personalities: None, sage: Personality
) -> None:
    command = fake_discord.command
    await command("persona set", user=ALICE, name="Alice", pronouns="she/her")
    overall = await command("memory status", user=ALICE)
    assert "Persona: **Alice** (she/her), set for every personality" in overall.text
    await command("persona set", user=ALICE, name="Captain Al", personality="sage")
    assert (
        "Persona: **Captain Al**, set for this personality"
        in (await command("memory status", user=ALICE, personality="sage")).text
    )
    assert "Persona: none" in (await command("memory status", user=BOB)).text
