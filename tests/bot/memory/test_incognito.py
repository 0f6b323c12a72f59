"""/memory incognito on the fake Discord, and chatting under it, with the real services behind both:
answered, never remembered, no 📝."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from bot.runtime import Runtime
from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.owners.incognito import IncognitoService
from memory.types import MessageRole
from models import Memory, Message, Personality
from testkit.fake_discord import CHANNEL, PLAIN_CHANNEL, FakeDiscord
from testkit.llm_server import LLMTestServer
from tests.bot.state import rows

ALICE = 201
BOB = 202


def ends_at(text: str) -> datetime:
    """The end a reply shows as a Discord timestamp (`<t:unix:f>`)."""
    found = re.search(r"<t:(\d+):f>", text)
    assert found is not None, text
    return datetime.fromtimestamp(int(found.group(1)), UTC)


async def exclusion_of(
    runtime: Runtime, personality: Personality, user: int, created_at: datetime
) -> str | None:
    """Store a message of the user said at `created_at` (as catch-up would, later); its exclusion."""
    external_id = f"said-{created_at.timestamp()}"
    message = LoggedMessage(external_id, str(user), "Alice", MessageRole.USER, "hello", created_at)
    async with runtime.sessionmaker.begin() as session:
        conversation = await ensure_conversation(session, personality.id, Venue(None, None, str(user)))
        await store_messages(session, conversation, [message])
    async with runtime.sessionmaker() as session:
        return await session.scalar(select(Message.memory_excluded).where(Message.external_id == external_id))


async def test_on_for_an_hour_shows_in_status_and_ends_by_itself(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    now = datetime.now(UTC)
    for_an_hour: dict[str, Any] = {"for": "1h"}  # `for` is the option's name, a keyword in Python
    on = await fake_discord.command(
        "memory incognito", user=ALICE, state="on", personality="sage", **for_an_hour
    )
    assert on.reply.ephemeral
    assert on.text.startswith("Incognito is on with **Sage**, until <t:")
    assert "nothing you say from now on becomes a memory" in on.text and "no 📝" in on.text
    end = ends_at(on.text)
    assert now + timedelta(minutes=59) <= end <= now + timedelta(minutes=61)
    status = await fake_discord.command("memory status", user=ALICE, personality="sage")
    assert "Incognito: on with **Sage**, until <t:" in status.text
    overall = await fake_discord.command("memory status", user=ALICE)
    assert "Incognito: on with **Sage**" in overall.text
    assert (
        "Incognito: off" in (await fake_discord.command("memory status", user=BOB, personality="sage")).text
    )

    # An hour later (the service's clock moved, nobody slept) it is over, with nothing run to end it.
    later = end + timedelta(minutes=1)
    assert (
        await IncognitoService(runtime.sessionmaker, clock=lambda: later).active(str(ALICE), sage.id) is None
    )
    assert await exclusion_of(runtime, sage, ALICE, end - timedelta(minutes=5)) == "incognito"
    assert await exclusion_of(runtime, sage, ALICE, later) is None


async def test_on_for_every_personality_until_off_and_off(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    on = await fake_discord.command("memory incognito", user=ALICE, state="on")
    assert on.text.startswith("Incognito is on with every personality, until you turn it off.")
    status = await fake_discord.command("memory status", user=ALICE, personality="sage")
    assert "Incognito: on with every personality, until you turn it off" in status.text

    # Naming one personality cannot end the span for all of them, and says so.
    only_sage = await fake_discord.command("memory incognito", user=ALICE, state="off", personality="sage")
    assert only_sage.text.startswith(
        "Incognito was not on with **Sage**. It is still on with every personality"
    )
    off = await fake_discord.command("memory incognito", user=ALICE, state="off")
    assert off.reply.ephemeral and off.text.startswith("Incognito is off with every personality")
    assert "Incognito: off" in (await fake_discord.command("memory status", user=ALICE)).text
    again = await fake_discord.command("memory incognito", user=ALICE, state="off")
    assert again.text == "Incognito was not on with every personality."
    unknown = await fake_discord.command("memory incognito", user=ALICE, state="on", personality="nobody")
    assert "No personality named 'nobody'" in unknown.text
    assert await runtime.incognito.current(str(ALICE)) == []


async def test_chatting_incognito_is_answered_without_a_memory_or_a_reaction(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "Your secret is safe with me."
    on = await fake_discord.command("memory incognito", user=ALICE, state="on", personality="lilith")
    assert "Incognito is on with **Lilith**" in on.text

    secret = await fake_discord.say("Lilith, my bank PIN is 4921.", user=ALICE, channel=PLAIN_CHANNEL)
    [reply] = fake_discord.sent_by_bot(PLAIN_CHANNEL)
    assert reply.content == "**Lilith**\nYour secret is safe with me."
    assert fake_discord.reactions == []
    stored = await rows(runtime)
    assert [(m.external_id, m.memory_excluded) for m in stored] == [
        (str(secret.id), "incognito"),
        (str(reply.id), "incognito"),
    ]
    assert all(m.memory_processed_at is not None for m in stored)  # looked at, and left out
    assert (await runtime.memory.form_pending()).memories == 0
    async with runtime.sessionmaker() as session:
        assert (await session.scalars(select(Memory))).all() == []

    off = await fake_discord.command("memory incognito", user=ALICE, state="off", personality="lilith")
    assert off.text.startswith("Incognito is off with **Lilith**")
    llm_server.responder = lambda body: "Biscuit, what a good name."
    dog = await fake_discord.say("Lilith, my dog is called Biscuit.", user=ALICE, channel=PLAIN_CHANNEL)
    assert len(fake_discord.sent_by_bot(PLAIN_CHANNEL)) == 2  # answered, as before
    assert fake_discord.reactions == [(PLAIN_CHANNEL, dog.id, "📝")]
    async with runtime.sessionmaker() as session:
        [memory] = (await session.scalars(select(Memory))).all()
    assert memory.source_message_ids[0] == str(dog.id) and "4921" not in memory.content


async def test_incognito_with_one_personality_leaves_the_others_remembering(
    fake_discord: FakeDiscord, runtime: Runtime, lilith: Personality, sage: Personality
) -> None:
    await runtime.incognito.start(str(ALICE), sage.id, None)
    to_sage = await fake_discord.say("Sage, I failed my driving test.", user=ALICE)
    to_lilith = await fake_discord.say("Lilith, I passed my exam.", user=ALICE)
    assert len(fake_discord.sent_by_bot(CHANNEL)) == 2  # both answered
    assert fake_discord.reactions == [(CHANNEL, to_lilith.id, "📝")]
    excluded = {m.external_id: m.memory_excluded for m in await rows(runtime) if m.role == "user"}
    assert excluded == {str(to_sage.id): "incognito", str(to_lilith.id): None}
