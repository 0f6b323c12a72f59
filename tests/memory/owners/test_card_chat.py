"""A character card in a chat: its lorebook, depth prompt and post-history instructions in the prompts
the test LLM server receives, through the chat service's own path (real PostgreSQL, LLM over HTTP)."""

from __future__ import annotations

import json
import logging

import pytest

from bot.runtime import Runtime
from memory.owners.cards import create_from_card, parse_card
from memory.owners.lore import Position
from memory.owners.lore_editing import LoreChanges
from models import Personality
from testkit.chat import chat_request
from testkit.llm_server import LLMTestServer
from tests.memory.chat.turns import answer, chat_requests
from tests.memory.chat.windows import use_small_window
from tests.memory.owners.cards import ELDORIA_BOOK, SERAPHINA_V2, with_data

ELDORIA = "Eldoria is a walled forest of silver oaks where Seraphina keeps watch."
SHADOWFANG = "The Shadowfang are grey wolves that fear moonlight."
DEFINITION = "Write Seraphina's next reply in a gentle fantasy roleplay."


@pytest.fixture
async def seraphina(runtime: Runtime, llm_server: LLMTestServer) -> Personality:
    """SillyTavern's kind of card, with its lorebook, imported as it is; replies that repeat nothing."""
    llm_server.responder = lambda body: "Mm."
    card = parse_card(json.dumps(with_data(SERAPHINA_V2, character_book=ELDORIA_BOOK)).encode())
    return (await create_from_card(runtime.personalities, card, by_operator=True)).personality


async def prompt_for(
    runtime: Runtime, llm_server: LLMTestServer, personality: Personality, text: str
) -> list[dict[str, str]]:
    """The messages the model received for this message (a DM of Ann's)."""
    turn = await answer(
        runtime,
        chat_request(
            personality.id, text, guild_id=None, channel_id="dm-ann", user_name="Ann", user_id="2002"
        ),
    )
    assert turn.reply.ok
    return list(chat_requests(llm_server)[-1]["messages"])


async def test_constant_lore_in_every_prompt_keyed_lore_only_when_its_keys_come_up(
    runtime: Runtime, llm_server: LLMTestServer, seraphina: Personality
) -> None:
    first = await prompt_for(runtime, llm_server, seraphina, "Hello? Where am I?")
    system = first[0]["content"]
    assert system.startswith(ELDORIA + "\n\n" + DEFINITION)  # before the character, macros filled
    assert SHADOWFANG not in system and "amulet" not in system.lower()

    wolves = (await prompt_for(runtime, llm_server, seraphina, "I hear Wolves howling."))[0]["content"]
    assert wolves.index(ELDORIA) < wolves.index(DEFINITION) < wolves.index(SHADOWFANG)  # after_char

    for text in ("Tell me about the amulet.", "The glade is quiet.", "Anything else?"):
        later = (await prompt_for(runtime, llm_server, seraphina, text))[0]["content"]
        assert ELDORIA in later
        assert SHADOWFANG not in later  # the wolves are beyond the book's scan depth of 2 now
        assert "amulet of dawn" not in later  # disabled
        assert "lanterns" not in later  # its secondary keys did not come up
    night = (await prompt_for(runtime, llm_server, seraphina, "The glade at night scares me."))[0]["content"]
    assert "At night the glade's lanterns light themselves." in night


async def test_depth_lore_depth_prompt_and_post_history_instructions_sit_where_sillytavern_puts_them(
    runtime: Runtime, llm_server: LLMTestServer, seraphina: Personality
) -> None:
    await prompt_for(runtime, llm_server, seraphina, "Hello.")
    await prompt_for(runtime, llm_server, seraphina, "Who are you?")
    messages = await prompt_for(runtime, llm_server, seraphina, "Can we cross the river?")
    contents = [m["content"] for m in messages[1:]]
    # The card's depth prompt 4 messages before the end of the history, the River entry 1 before it
    # (the newest message), the post-history instructions after it, each a system message.
    assert contents == [
        "Hello.",
        "Remember the forest.",
        "Mm.",
        "Who are you?",
        "Mm.",
        "[The river Lethe washes away memories.]",
        "Can we cross the river?",
        "Stay gentle.",
    ]
    roles = ["system", "user", "system", "assistant", "user", "assistant", "system", "user", "system"]
    assert [m["role"] for m in messages] == roles


async def test_what_was_inserted_and_why_is_logged_at_debug(
    runtime: Runtime, llm_server: LLMTestServer, seraphina: Personality, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="memory"):
        await prompt_for(runtime, llm_server, seraphina, "Shadowfang!")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "Lore in the prompt" in logged
    assert "entry 1 (Eldoria): constant" in logged and "entry 2 (Shadowfang): key 'Shadowfang'" in logged


async def test_the_lore_budget_keeps_the_preferred_entries(
    runtime: Runtime, llm_server: LLMTestServer, seraphina: Personality, monkeypatch: pytest.MonkeyPatch
) -> None:
    lore = runtime.lore
    long = "The archive holds scrolls of every age. " * 40
    await lore.add(seraphina.name, LoreChanges(keys=["archive"], content="LOW " + long, order=1), actor=None)
    await lore.add(
        seraphina.name, LoreChanges(keys=["archive"], content="HIGH " + long, priority=10), actor=None
    )
    await use_small_window(runtime, seraphina, llm_server, monkeypatch, window=4096)
    system = (await prompt_for(runtime, llm_server, seraphina, "Show me the archive."))[0]["content"]
    assert "HIGH The archive" in system and "LOW The archive" not in system
    assert ELDORIA in system  # small, and preferred by its insertion order over the low one


async def test_a_regex_key_that_backtracks_forever_does_not_hold_up_the_reply(
    runtime: Runtime, llm_server: LLMTestServer, seraphina: Personality
) -> None:
    lore = runtime.lore
    await lore.add(
        seraphina.name, LoreChanges(keys=[r"(x+x+)+y"], content="Never.", use_regex=True), actor=None
    )
    system = (await prompt_for(runtime, llm_server, seraphina, "x" * 3000))[0]["content"]
    assert "Never." not in system and ELDORIA in system


async def test_lore_added_to_a_personality_without_a_card_reaches_its_prompt(
    runtime: Runtime, llm_server: LLMTestServer
) -> None:
    plain, _ = await runtime.personalities.create("Plain", prompt="You are Plain.")
    lore = runtime.lore
    await lore.add(
        "plain",
        LoreChanges(keys=["porto"], content="{{user}} once lived in Porto.", position=Position.AFTER),
        actor=None,
    )
    system = (await prompt_for(runtime, llm_server, plain, "I miss Porto."))[0]["content"]
    assert system.startswith("You are Plain.\n\nAnn once lived in Porto.")
