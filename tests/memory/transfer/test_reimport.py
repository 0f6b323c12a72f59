"""Issue 33, item 3: importing a chat already imported adds nothing, whatever conversation the venue is
in now: after `chat --new` set the imported one aside, a re-import used to append the whole chat again
(36 new messages, 15 memories) to the new conversation."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from bot.runtime import Runtime
from models import Memory, Message
from testkit.imports import import_chat
from tests.memory.transfer.test_sillytavern import SERAPHINA_CHAT


async def count(runtime: Runtime, column: Any) -> int:
    async with runtime.sessionmaker() as session:
        return int(await session.scalar(select(func.count(column))) or 0)


async def test_a_chat_imported_again_after_chat_new_adds_nothing(runtime: Runtime) -> None:
    seraphina, _ = await runtime.personalities.create("Seraphina")
    first = await import_chat(runtime, seraphina, SERAPHINA_CHAT)
    assert (first.messages_new, first.formation.memories) == (5, 2)
    # What `personae chat --new` (and /new) does in the user's DM with the personality.
    set_aside = await runtime.chat.start_new_conversation(
        personality_id=seraphina.id, guild_id=None, channel_id=None, user_id="555"
    )
    assert set_aside is not None
    again = await import_chat(runtime, seraphina, SERAPHINA_CHAT)
    assert (again.messages_new, again.formation.memories) == (0, 0)
    assert await count(runtime, Message.id) == 5
    assert await count(runtime, Memory.id) == 2


async def test_a_longer_copy_after_chat_new_adds_only_what_is_new_beside_what_it_continues(
    runtime: Runtime,
) -> None:
    seraphina, _ = await runtime.personalities.create("Seraphina")
    await import_chat(runtime, seraphina, SERAPHINA_CHAT)
    await runtime.chat.start_new_conversation(
        personality_id=seraphina.id, guild_id=None, channel_id=None, user_id="555"
    )
    longer = SERAPHINA_CHAT + SERAPHINA_CHAT.splitlines()[-2].replace("Thank you.", "Found her!") + "\n"
    report = await import_chat(runtime, seraphina, longer)
    assert report.messages_new == 1
    assert await count(runtime, Message.id) == 6
