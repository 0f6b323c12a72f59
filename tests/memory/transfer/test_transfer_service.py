"""The transfer service decides what its callers used to (issue 32): who an imported reply is said by,
and when an import replaces what the log holds (a kept chat) or only adds to it (a transcript)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from bot.runtime import Runtime
from memory.errors import InvalidInputError
from memory.transfer.sillytavern import parse_sillytavern
from memory.transfer.transcript import parse_transcript
from models import Conversation, Message
from tests.memory.transfer.test_sillytavern import SERAPHINA_CHAT

OLD_LINE = "I'm Ann. My cat Miso is lost in the forest."
NEW_LINE = "I'm Ann. My dog Rex is lost in the forest."


def transcript(*records: dict[str, str]) -> str:
    return "\n".join(json.dumps(record) for record in records)


async def said(runtime: Runtime) -> list[str]:
    async with runtime.sessionmaker() as session:
        return list((await session.scalars(select(Message.content).order_by(Message.id))).all())


async def test_imported_replies_are_said_by_their_personality_as_the_chats_own_replies_are(
    runtime: Runtime,
) -> None:
    sage, _ = await runtime.personalities.create("Sage")
    lil, _ = await runtime.personalities.create("Lil")
    into_sage, _ = parse_transcript(
        transcript(
            {"id": "a1", "role": "user", "content": "I planted tulips today.", "user_id": "7"},
            {"id": "a2", "role": "assistant", "content": "Lovely! Which colour?"},
        )
    )
    naming_lil, _ = parse_transcript(
        transcript(
            {"id": "b1", "role": "user", "content": "My bike is red.", "user_id": "7", "personality": "Lil"},
            {"id": "b2", "role": "assistant", "content": "A red bike suits you.", "personality": "Lil"},
        )
    )
    await runtime.transfer.import_transcript(into_sage, personality=sage, default_user_id=None)
    await runtime.transfer.import_transcript(naming_lil, default_user_id=None)
    async with runtime.sessionmaker() as session:
        authors = set(
            await session.execute(
                select(Conversation.personality_id, Message.author_id)
                .join(Conversation, Conversation.id == Message.conversation_id)
                .where(Message.role == "assistant")
            )
        )
    assert authors == {(sage.id, "personality:sage"), (lil.id, "personality:lil")}


async def test_a_kept_chat_replaces_its_edited_line_where_a_transcript_is_refused(runtime: Runtime) -> None:
    seraphina, _ = await runtime.personalities.create("Seraphina")
    chat = parse_sillytavern(SERAPHINA_CHAT)
    await runtime.transfer.import_kept_chat(chat.lines, personality=seraphina, default_user_id="555")
    edited = parse_sillytavern(SERAPHINA_CHAT.replace(OLD_LINE, NEW_LINE))
    # As lines of a transcript, the reply now answering the edited line is another message of its id.
    with pytest.raises(InvalidInputError, match="already in the log for another message"):
        await runtime.transfer.import_transcript(edited.lines, personality=seraphina, default_user_id="555")
    assert OLD_LINE in await said(runtime) and NEW_LINE not in await said(runtime)
    report = await runtime.transfer.import_kept_chat(
        edited.lines, personality=seraphina, default_user_id="555"
    )
    assert report.messages_new == 2  # the edited line and the reply kept after it
    assert OLD_LINE not in await said(runtime) and NEW_LINE in await said(runtime)
