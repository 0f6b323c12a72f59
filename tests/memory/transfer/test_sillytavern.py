"""SillyTavern chats: the metadata line, messages in every date form SillyTavern has written, swipes
and system lines left out, each problem named by its line; imported, they become the user's memories."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from bot.runtime import Runtime
from memory.errors import InvalidInputError
from memory.transfer.sillytavern import parse_send_date, parse_sillytavern
from memory.transfer.transcript import MAX_CONTENT_CHARS
from memory.types import MessageRole
from models import Memory, Message
from testkit.imports import import_chat

METADATA = {
    "user_name": "Ann",
    "character_name": "Seraphina",
    "create_date": "2026-11-22 @16h 50m 00s 000ms",
    "chat_metadata": {"note_prompt": "", "tainted": False},
}


def st_chat(*messages: Any, metadata: dict[str, Any] | None = METADATA) -> str:
    records = ([metadata] if metadata is not None else []) + list(messages)
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n"


def message(
    mes: Any, is_user: Any, send_date: Any = "November 22, 2026 4:51pm", **extra: Any
) -> dict[str, Any]:
    name = "Ann" if is_user is True else "Seraphina"
    return {"name": name, "is_user": is_user, "is_name": True, "send_date": send_date, "mes": mes, **extra}


# A chat as SillyTavern saves it: the greeting, swipes on a reply, a hidden line, a /sys narrator line.
SERAPHINA_CHAT = st_chat(
    message("*Seraphina smiles* You're awake, Ann.", False, swipes=["*Seraphina smiles* You're awake, Ann."]),
    message("I'm Ann. My cat Miso is lost in the forest.", True, "2026-11-22T16:52:10.000Z"),
    message(
        "We will find Miso before nightfall.",
        False,
        1795366400000,
        swipes=["A swipe nobody kept.", "We will find Miso before nightfall."],
        swipe_id=1,
        extra={"api": "openai", "model": "x"},
    ),
    message("(OOC: this line was hidden)", True, is_system=True),
    message("The wind rises.", False, extra={"type": "narrator"}),
    "",
    message("Thank you. Miso has a white paw.", True, "2026-11-22 @17h 3m 5s 120ms"),
    message("A white paw, I'll look for it.", False, "not a date at all"),
)


def test_a_chat_becomes_transcript_lines() -> None:
    chat = parse_sillytavern(SERAPHINA_CHAT)
    assert (chat.character_name, chat.user_name) == ("Seraphina", "Ann")
    assert chat.skipped == 3  # the hidden line, the narrator, the blank line
    assert [(line.role, line.content) for line in chat.lines] == [
        (MessageRole.ASSISTANT, "*Seraphina smiles* You're awake, Ann."),
        (MessageRole.USER, "I'm Ann. My cat Miso is lost in the forest."),
        (MessageRole.ASSISTANT, "We will find Miso before nightfall."),  # `mes`, not a swipe
        (MessageRole.USER, "Thank you. Miso has a white paw."),
        (MessageRole.ASSISTANT, "A white paw, I'll look for it."),
    ]
    assert [line.author for line in chat.lines] == ["Seraphina", "Ann", "Seraphina", "Ann", "Seraphina"]
    assert all(line.user_id is None and line.id.startswith("st-") for line in chat.lines)
    assert [line.timestamp for line in chat.lines] == [
        datetime(2026, 11, 22, 16, 51, tzinfo=UTC),
        datetime(2026, 11, 22, 16, 52, 10, tzinfo=UTC),
        datetime.fromtimestamp(1795366400, UTC),
        datetime(2026, 11, 22, 17, 3, 5, 120000, tzinfo=UTC),
        datetime(2026, 11, 22, 17, 3, 5, 120000, tzinfo=UTC),  # an unknown date: the one before it
    ]


def test_ids_are_stable_and_a_repeated_message_keeps_its_own() -> None:
    first = parse_sillytavern(SERAPHINA_CHAT).lines
    assert [line.id for line in parse_sillytavern(SERAPHINA_CHAT).lines] == [line.id for line in first]
    longer = SERAPHINA_CHAT + json.dumps(message("ok", True)) + "\n" + json.dumps(message("ok", True)) + "\n"
    again = parse_sillytavern(longer).lines
    assert [line.id for line in again[:5]] == [line.id for line in first]  # a longer copy adds only the new
    assert again[6].id == again[5].id + "-2"
    other_chat = parse_sillytavern(st_chat(message("ok", True), metadata={**METADATA, "create_date": "x"}))
    assert other_chat.lines[0].id not in {line.id for line in again}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("November 22, 2026 4:51pm", datetime(2026, 11, 22, 16, 51, tzinfo=UTC)),
        ("Nov 2, 2026 11:05AM", datetime(2026, 11, 2, 11, 5, tzinfo=UTC)),
        ("November 22, 2026 4:51 pm", datetime(2026, 11, 22, 16, 51, tzinfo=UTC)),
        ("2026-11-22T16:51:00Z", datetime(2026, 11, 22, 16, 51, tzinfo=UTC)),
        ("2026-11-22T16:51:00+02:00", datetime(2026, 11, 22, 14, 51, tzinfo=UTC)),
        ("2026-11-22 @16h 51m 03s 120ms", datetime(2026, 11, 22, 16, 51, 3, 120000, tzinfo=UTC)),
        (1795366260000, datetime(2026, 11, 22, 16, 51, tzinfo=UTC)),
        ("1795366260000", datetime(2026, 11, 22, 16, 51, tzinfo=UTC)),
        (1795366260, datetime(2026, 11, 22, 16, 51, tzinfo=UTC)),
        (10**30, None),
        ("9999-12-31T23:59:59-12:00", None),  # past year 9999 in UTC: none of its forms
        ("0001-01-01T00:00:00+14:00", None),
        ("yesterday", None),
        ("2026-13-40 @16h 51m 03s", None),
        (True, None),
        ([], None),
        (None, None),
    ],
)
def test_send_dates(value: Any, expected: datetime | None) -> None:
    assert parse_send_date(value) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (st_chat("{oops"), "line 2: not valid JSON (Expecting property name enclosed in double quotes)"),
        (st_chat("[1]"), "line 2: expected a JSON object"),
        (st_chat({"name": "x", "is_user": True}), "line 2: missing required field 'mes'"),
        (st_chat(message(["hi"], True)), "line 2: 'mes' must be a string"),
        (st_chat(message("hi", "yes")), "line 2: 'is_user' must be true or false"),
        (st_chat(message("hi", None)), "line 2: 'is_user' must be true or false"),
        (
            st_chat(message("x" * (MAX_CONTENT_CHARS + 1), True)),
            f"line 2: 'mes' is over {MAX_CONTENT_CHARS} characters",
        ),
        (
            st_chat({"role": "user"}, metadata=None),
            "line 1: not a SillyTavern chat (its first line is neither the chat's metadata nor a message)",
        ),
        (st_chat("[" * 100_000 + "]" * 100_000), "line 2: JSON nested too deeply for a transcript line"),
    ],
)
def test_bad_lines_are_named(text: str, problem: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_sillytavern(text)
    assert str(caught.value) == problem


def test_what_json_stringify_leaves_raw_stays_in_its_message() -> None:
    """JSON.stringify writes U+2028 and U+2029 raw, and an editor may add a byte order mark."""
    said = "line one\u2028line two\u2029and \u0085 three"
    text = "\ufeff" + st_chat(message(said, True), message("noted", False)).replace("\n", "\r\n")
    text = text.replace(json.dumps(said), json.dumps(said, ensure_ascii=False))
    assert said in text  # raw, as SillyTavern saves it
    chat = parse_sillytavern(text)
    assert [line.content for line in chat.lines] == [said, "noted"] and chat.skipped == 0


def test_a_send_date_past_the_years_a_database_keeps_takes_the_time_before_it() -> None:
    chat = parse_sillytavern(
        st_chat(
            message("hi", True, "2026-11-22T16:52:10Z"), message("hello", False, "9999-12-31T23:59:59-12:00")
        )
    )
    assert [line.timestamp for line in chat.lines] == [datetime(2026, 11, 22, 16, 52, 10, tzinfo=UTC)] * 2


def test_a_chat_without_its_metadata_line_is_read_too() -> None:
    chat = parse_sillytavern(st_chat(message("hi", True), message("hello", False), metadata=None))
    assert chat.character_name is None and [line.content for line in chat.lines] == ["hi", "hello"]


async def test_imported_chat_becomes_the_users_memories_of_that_personality(runtime: Runtime) -> None:
    seraphina, _ = await runtime.personalities.create("Seraphina")
    report = await import_chat(runtime, seraphina, SERAPHINA_CHAT)
    assert (report.messages_read, report.messages_new, report.formation.memories) == (5, 5, 2)
    memories = await runtime.memory.recall(personality_id=seraphina.id, user_id="555", query="Miso the cat")
    contents = {m.content for m in memories}
    assert (
        "Ann: I'm Ann. My cat Miso is lost in the forest.\nSeraphina: We will find Miso before nightfall."
        in contents
    )
    assert all("A swipe nobody kept" not in m.content and "hidden" not in m.content for m in memories)
    assert await runtime.memory.recall(personality_id=seraphina.id, user_id="556", query="Miso") == []
    again = await import_chat(runtime, seraphina, SERAPHINA_CHAT)
    assert (again.messages_new, again.formation.memories) == (0, 0)


async def test_reimporting_a_chat_whose_kept_swipe_changed_replaces_that_exchanges_memory(
    runtime: Runtime,
) -> None:
    """The user kept another swipe of a reply in SillyTavern and imports the chat again: that
    exchange's memory now holds the reply kept, and no memory is left without its user line."""
    seraphina, _ = await runtime.personalities.create("Seraphina")
    await import_chat(runtime, seraphina, SERAPHINA_CHAT)
    kept = "We will find Miso before nightfall."
    edited = SERAPHINA_CHAT.replace(f'"mes": "{kept}"', '"mes": "A swipe nobody kept."').replace(
        '"swipe_id": 1', '"swipe_id": 0'
    )
    assert edited != SERAPHINA_CHAT
    report = await import_chat(runtime, seraphina, edited)
    assert (report.messages_new, report.formation.memories) == (1, 1)
    async with runtime.sessionmaker() as session:
        live = (
            await session.scalars(
                select(Memory.content).where(Memory.personality_id == seraphina.id, Memory.state != "deleted")
            )
        ).all()
        replies = (await session.scalars(select(Message.content).where(Message.role == "assistant"))).all()
    assert sorted(live) == [
        "Ann: I'm Ann. My cat Miso is lost in the forest.\nSeraphina: A swipe nobody kept.",
        "Ann: Thank you. Miso has a white paw.\nSeraphina: A white paw, I'll look for it.",
    ]
    assert kept not in replies  # the log holds the reply kept, not both
    recalled = await runtime.memory.recall(personality_id=seraphina.id, user_id="555", query="Miso")
    assert all(kept not in m.content for m in recalled)
    again = await import_chat(runtime, seraphina, edited)
    assert (again.messages_new, again.formation.memories) == (0, 0)
