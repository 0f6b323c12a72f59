"""Constraints that protect the data whatever code writes it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from models import Conversation, LLMConfig, Memory, Message, Personality, SystemPrompt, UserSettings


async def test_deleting_summarizer_config_and_prompt_sets_null(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    async with sessionmaker.begin() as session:
        config = LLMConfig(name="cheap", model="openai/gpt-4o-mini")
        prompt = SystemPrompt(name="terse", prompt_type="summarizer", content="Be terse.")
        session.add_all([config, prompt])
        await session.flush()
        personality = Personality(
            name="lilith",
            display_name="Lilith",
            summarizer_llm_config_id=config.id,
            summarizer_prompt_id=prompt.id,
            chat_llm_config_id=config.id,
        )
        session.add(personality)
    async with sessionmaker.begin() as session:
        await session.delete(await session.get(LLMConfig, config.id))
        await session.delete(await session.get(SystemPrompt, prompt.id))
    async with sessionmaker() as session:
        reloaded = await session.scalar(select(Personality).where(Personality.name == "lilith"))
        assert reloaded is not None
        assert reloaded.summarizer_llm_config_id is None
        assert reloaded.summarizer_prompt_id is None
        assert reloaded.chat_llm_config_id is None
        assert reloaded.memory_mode == "verbatim"  # the default keeps existing behaviour
        assert reloaded.memory_enabled is True


@pytest.mark.parametrize(
    "duplicate",
    [
        lambda: [Personality(name="same", display_name="A"), Personality(name="same", display_name="B")],
        lambda: [LLMConfig(name="cfg", model="a/b"), LLMConfig(name="cfg", model="c/d")],
        lambda: [UserSettings(user_id="42"), UserSettings(user_id="42")],
    ],
    ids=["personality-name", "llm-config-name", "global-user-settings"],
)
async def test_unique_names(sessionmaker: async_sessionmaker[AsyncSession], duplicate) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IntegrityError):
        async with sessionmaker.begin() as session:
            session.add_all(duplicate())


@pytest.mark.parametrize(
    "bad",
    [
        lambda: Personality(name="x", display_name="X", memory_mode="sometimes"),
        lambda: Personality(name="Not A Slug", display_name="X"),
        lambda: SystemPrompt(name="p", prompt_type="poem", content="x"),
        lambda: LLMConfig(name="hot", model="a/b", temperature=5),
    ],
    ids=["memory-mode", "slug", "prompt-type", "temperature"],
)
async def test_check_constraints(sessionmaker: async_sessionmaker[AsyncSession], bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IntegrityError):
        async with sessionmaker.begin() as session:
            session.add(bad())


async def test_user_settings_per_personality_and_global_coexist(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    async with sessionmaker.begin() as session:
        personality = Personality(name="p1", display_name="P1")
        session.add(personality)
        await session.flush()
        session.add_all(
            [
                UserSettings(user_id="7", memory_enabled=False),
                UserSettings(user_id="7", personality_id=personality.id, summarization="enabled"),
            ]
        )
    with pytest.raises(IntegrityError):
        async with sessionmaker.begin() as session:
            session.add(UserSettings(user_id="7", personality_id=personality.id))


async def test_deleting_personality_cascades_to_its_data(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    async with sessionmaker.begin() as session:
        personality = Personality(name="gone", display_name="Gone")
        session.add(personality)
        await session.flush()
        conversation = Conversation(personality_id=personality.id, venue_key="dm:1", is_dm=True)
        session.add(conversation)
        await session.flush()
        session.add(
            Message(
                conversation_id=conversation.id, external_id="m1", author_id="1", role="user", content="hi"
            )
        )
        session.add(
            Memory(
                id=uuid.uuid4(),
                personality_id=personality.id,
                user_id="1",
                mode="verbatim",
                content="hi",
                source_message_ids=["m1"],
                occurred_at=datetime.now(UTC),
            )
        )
    async with sessionmaker.begin() as session:
        await session.delete(await session.get(Personality, personality.id))
    async with sessionmaker() as session:
        assert (await session.scalars(select(Message))).all() == []
        assert (await session.scalars(select(Memory))).all() == []


async def test_message_external_id_unique_per_conversation(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    async with sessionmaker.begin() as session:
        personality = Personality(name="echo", display_name="Echo")
        session.add(personality)
        await session.flush()
        conversation = Conversation(personality_id=personality.id, venue_key="ch:1")
        session.add(conversation)
        await session.flush()
    with pytest.raises(IntegrityError):
        async with sessionmaker.begin() as session:
            for _ in range(2):
                session.add(
                    Message(
                        conversation_id=conversation.id,
                        external_id="dup",
                        author_id="1",
                        role="user",
                        content="x",
                    )
                )
