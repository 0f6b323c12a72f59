"""A card's greeting opens a new conversation: stored once as the personality's first message, seen by
the model in the history, forming no memory of its own."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.runtime import Runtime
from memory.owners.cards import create_from_card, parse_card
from memory.owners.greetings import Greetings
from memory.owners.personalities import PersonalityService
from models import Memory, Message
from testkit.chat import chat_request
from testkit.llm_server import LLMTestServer
from tests.memory.chat.turns import answer, chat_requests, stored
from tests.memory.owners.cards import SERAPHINA_V2, v3

FIRST = "*Seraphina smiles* You're awake, Ann."
ALTERNATE = "*Seraphina hums* Rested, Ann?"


async def seraphina(personalities: PersonalityService, card: dict[str, Any] = SERAPHINA_V2) -> int:
    imported = await create_from_card(personalities, parse_card(json.dumps(card).encode()), by_operator=True)
    return imported.personality.id


async def test_a_new_conversation_is_greeted_once_with_one_of_the_cards_greetings(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    personality_id = await seraphina(PersonalityService(sessionmaker))
    greetings = Greetings(sessionmaker)
    seen = set()
    for channel in range(40):  # a greeting chosen at random: both are seen (a miss is 2 in 2**40)
        venue = {"guild_id": "5", "channel_id": f"c{channel}", "user_id": "2002"}
        greeting = await greetings.greet(personality_id=personality_id, user_name="Ann", **venue)
        assert greeting is not None and greeting.message_id == f"greeting:{greeting.conversation_id}"
        seen.add(greeting.text)
        assert await greetings.greet(personality_id=personality_id, user_name="Bob", **venue) is None
        async with sessionmaker() as session:
            rows = (
                await session.scalars(
                    select(Message).where(Message.conversation_id == greeting.conversation_id)
                )
            ).all()
        assert [(m.role, m.author_name, m.content, m.reply_to_id) for m in rows] == [
            ("assistant", "Seraphina", greeting.text, None)
        ]
    assert seen == {FIRST, ALTERNATE}


async def test_no_greeting_without_one_on_the_card_or_once_the_conversation_began(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    personalities = PersonalityService(sessionmaker)
    greetings = Greetings(sessionmaker)
    plain, _ = await personalities.create("Plain")
    dm: dict[str, Any] = {"guild_id": None, "channel_id": "dm", "user_id": "2002", "user_name": "Ann"}
    assert await greetings.greet(personality_id=plain.id, **dm) is None
    v3_card = v3(
        SERAPHINA_V2, nickname="Sera", first_mes="Hi {{user}}, I'm {{char}}.", alternate_greetings=[]
    )
    personality_id = await seraphina(personalities, v3_card)
    greeting = await greetings.greet(personality_id=personality_id, **dm)
    assert greeting is not None and greeting.text == "Hi Ann, I'm Sera."  # the V3 nickname for {{char}}


async def test_the_model_sees_the_greeting_and_it_forms_no_memory_of_its_own(
    runtime: Runtime, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Then rest a while."
    personality_id = await seraphina(
        runtime.personalities, {**SERAPHINA_V2, "data": {**SERAPHINA_V2["data"], "alternate_greetings": []}}
    )
    greeting = await Greetings(runtime.sessionmaker).greet(
        personality_id=personality_id, guild_id=None, channel_id="dm-ann", user_id="2002", user_name="Ann"
    )
    assert greeting is not None and greeting.text == FIRST
    personality = await runtime.personalities.get("seraphina")
    turn = await answer(
        runtime,
        chat_request(
            personality.id,
            "I'm so tired.",
            guild_id=None,
            channel_id="dm-ann",
            user_id="2002",
            user_name="Ann",
        ),
    )
    reply = turn.reply
    assert reply.ok and reply.prepared.conversation_id == greeting.conversation_id
    sent = chat_requests(llm_server)[-1]["messages"]
    history = [(m["role"], m["content"]) for m in sent if m["role"] != "system"]
    assert history == [("assistant", FIRST), ("user", "I'm so tired.")]
    async with runtime.sessionmaker() as session:
        sources = (await session.scalars(select(Memory.source_message_ids))).all()
    rows = await stored(runtime, greeting.conversation_id)
    assert [list(s) for s in sources] == [[rows[1].external_id, rows[2].external_id]]  # not the greeting
    assert all(m.memory_processed_at is not None for m in rows)
