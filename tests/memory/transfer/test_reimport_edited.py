"""Issue 33: a SillyTavern chat whose user edited or deleted a message of theirs imports again, by
position and content: the exchanges that changed are replaced, their old text left nowhere (log,
memories, index), and nothing is added for what did not change. Before, the reply after an edited or
deleted user line collided with its stored copy (it answered another line now) and the import refused,
asking for ids a SillyTavern chat cannot carry."""

from __future__ import annotations

import json

from sqlalchemy import func, or_, select

from bot.runtime import Runtime
from memory.transfer.kept_chat import chat_of, id_without_chat
from memory.transfer.sillytavern import parse_sillytavern
from models import Memory, Message, Personality
from testkit.imports import import_chat
from tests.memory.transfer.test_sillytavern import SERAPHINA_CHAT, message, st_chat

OLD_LINE = "I'm Ann. My cat Miso is lost in the forest."


async def texts(runtime: Runtime, personality: Personality) -> tuple[list[str], list[str]]:
    """The log's messages and every memory row's text (live or not) of the personality."""
    async with runtime.sessionmaker() as session:
        said = (await session.scalars(select(Message.content).order_by(Message.id))).all()
        kept = (
            await session.scalars(
                select(func.concat(Memory.content, " | ", Memory.content_verbatim)).where(
                    Memory.personality_id == personality.id
                )
            )
        ).all()
    return list(said), list(kept)


async def recalled(runtime: Runtime, personality: Personality, query: str) -> list[str]:
    found = await runtime.memory.recall(personality_id=personality.id, user_id="555", query=query)
    return [m.content for m in found]


async def assert_gone(runtime: Runtime, personality: Personality, old: str, query: str) -> None:
    said, kept = await texts(runtime, personality)
    assert old not in said
    assert not [text for text in kept if old in text]
    assert not [text for text in await recalled(runtime, personality, query) if old in text]


async def test_a_user_line_edited_in_sillytavern_replaces_its_exchange(runtime: Runtime) -> None:
    seraphina, _ = await runtime.personalities.create("Seraphina")
    first = await import_chat(runtime, seraphina, SERAPHINA_CHAT)
    assert (first.messages_new, first.formation.memories) == (5, 2)
    edited_line = "I'm Ann. My dog Rex is lost in the forest."
    edited = SERAPHINA_CHAT.replace(OLD_LINE, edited_line)
    report = await import_chat(runtime, seraphina, edited)
    # The edited line and the reply kept after it (now answering it); one memory formed anew.
    assert (report.messages_new, report.formation.memories) == (2, 1)
    await assert_gone(runtime, seraphina, OLD_LINE, "Miso lost in the forest")
    said, _ = await texts(runtime, seraphina)
    assert len(said) == 5 and edited_line in said
    assert any(edited_line in text for text in await recalled(runtime, seraphina, "Rex the dog"))
    again = await import_chat(runtime, seraphina, edited)
    assert (again.messages_new, again.formation.memories) == (0, 0)


async def test_a_user_line_deleted_in_sillytavern_leaves_its_reply_with_the_line_before(
    runtime: Runtime,
) -> None:
    seraphina, _ = await runtime.personalities.create("Seraphina")
    await import_chat(runtime, seraphina, SERAPHINA_CHAT)
    deleted = "Thank you. Miso has a white paw."
    lines = [line for line in SERAPHINA_CHAT.splitlines() if deleted not in line]
    report = await import_chat(runtime, seraphina, "\n".join(lines) + "\n")
    assert report.messages_new == 1  # the reply kept, stored again answering the line now before it
    await assert_gone(runtime, seraphina, deleted, "Miso white paw")
    async with runtime.sessionmaker() as session:
        live = (await session.scalars(select(Memory.content).where(Memory.state != "deleted"))).all()
    assert live == [
        f"Ann: {OLD_LINE}\nSeraphina: We will find Miso before nightfall.\n"
        "Seraphina: A white paw, I'll look for it."
    ]


async def test_an_exchange_deleted_or_regenerated_in_sillytavern_goes_from_memory(runtime: Runtime) -> None:
    seraphina, _ = await runtime.personalities.create("Seraphina")
    chat = st_chat(
        message("Hello Ann.", False, "2026-11-22T16:00:00Z"),
        message("My locker code is 4417.", True, "2026-11-22T16:01:00Z"),
        message("Noted, 4417.", False, "2026-11-22T16:02:00Z"),
        message("My sister is Beatrix.", True, "2026-11-22T16:03:00Z"),
        message("Beatrix, a fine name.", False, "2026-11-22T16:04:00Z"),
        message("I live in Lyon.", True, "2026-11-22T16:05:00Z"),
        message("Lyon is lovely.", False, "2026-11-22T16:06:00Z"),
    )
    assert (await import_chat(runtime, seraphina, chat)).formation.memories == 3
    kept = [line for line in chat.splitlines() if "4417" not in line]  # the middle exchange deleted
    # ... and the last line edited, its reply regenerated (a new swipe, sent later).
    kept[-2] = json.dumps(message("I live in Nantes.", True, "2026-11-22T16:05:00Z"))
    kept[-1] = json.dumps(message("Nantes, by the river.", False, "2026-11-22T16:07:00Z"))
    report = await import_chat(runtime, seraphina, "\n".join(kept) + "\n")
    assert (report.messages_new, report.formation.memories) == (2, 1)
    for old, query in (("4417", "locker code"), ("Lyon", "where does Ann live")):
        await assert_gone(runtime, seraphina, old, query)
    said, _ = await texts(runtime, seraphina)
    assert said.count("My sister is Beatrix.") == 1 and len(said) == 5


async def test_an_edited_chat_after_chat_new_is_replaced_where_it_was_imported(runtime: Runtime) -> None:
    """`chat --new` set the imported conversation aside: the edit replaces the exchange there, and the
    new conversation gets nothing of the chat."""
    seraphina, _ = await runtime.personalities.create("Seraphina")
    await import_chat(runtime, seraphina, SERAPHINA_CHAT)
    async with runtime.sessionmaker() as session:
        imported_into = await session.scalar(select(func.min(Message.conversation_id)))
    await runtime.chat.start_new_conversation(
        personality_id=seraphina.id, guild_id=None, channel_id=None, user_id="555"
    )
    edited = SERAPHINA_CHAT.replace(OLD_LINE, "I'm Ann. My dog Rex is lost in the forest.")
    assert (await import_chat(runtime, seraphina, edited)).messages_new == 2
    assert (await import_chat(runtime, seraphina, SERAPHINA_CHAT)).messages_new == 2  # edited back
    await assert_gone(runtime, seraphina, "My dog Rex", "Rex the dog")
    async with runtime.sessionmaker() as session:
        where = (await session.scalars(select(Message.conversation_id).distinct())).all()
        rows = await session.scalar(
            select(func.count(Memory.id)).where(or_(Memory.state != "deleted", Memory.content != ""))
        )
    assert where == [imported_into]
    assert rows == 2


async def test_a_chat_imported_before_ids_named_their_chat_is_known_by_its_older_ids(
    runtime: Runtime,
) -> None:
    seraphina, _ = await runtime.personalities.create("Seraphina")
    lines = parse_sillytavern(SERAPHINA_CHAT).lines
    older = [line.model_copy(update={"id": id_without_chat(line.id)}) for line in lines]
    assert all(line.id.startswith("st-") and chat_of(line.id) is None for line in older)
    await runtime.transfer.import_kept_chat(older, personality=seraphina, default_user_id="555")
    again = await import_chat(runtime, seraphina, SERAPHINA_CHAT)
    assert (again.messages_new, again.formation.memories) == (0, 0)
    kept = "We will find Miso before nightfall."
    swiped = SERAPHINA_CHAT.replace(f'"mes": "{kept}"', '"mes": "A swipe nobody kept."')
    assert (await import_chat(runtime, seraphina, swiped)).messages_new == 1
    await assert_gone(runtime, seraphina, kept, "find Miso before nightfall")
