"""Issue 34: /memory reset cancels what the user said in the conversation that is not yet a memory, so
no memory appears after a reset from words said before it; other users' exchanges there still form."""

from __future__ import annotations

from sqlalchemy import select

from bot.runtime import Runtime
from models import Memory, Personality
from testkit.fake_discord import CHANNEL, GUILD, FakeDiscord
from tests.bot.memory.test_message_actions import ALICE, BOB, Chat


async def memories_of(runtime: Runtime) -> dict[str, list[str]]:
    async with runtime.sessionmaker() as session:
        rows = (await session.scalars(select(Memory).where(Memory.state != "deleted"))).all()
    found: dict[str, list[str]] = {}
    for m in rows:
        found.setdefault(m.user_id, []).append(m.content)
    return found


async def test_a_reset_cancels_the_users_pending_memories_here(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    chat = Chat(runtime, fake_discord, sage)
    await chat.say(ALICE, "The door code at my office is 4921.")
    await chat.say(BOB, "My bike is a green Bianchi.")
    await chat.say(ALICE, "My cat is called Mochi.", answered=False)  # its reply still to come

    reset = await fake_discord.command(
        "memory reset", user=ALICE, guild=GUILD, channel=CHANNEL, personality="sage"
    )
    assert reset.reply.ephemeral
    assert "Anything you said here that is not yet a memory never will be" in reset.text

    await runtime.memory.form_pending()
    formed = await memories_of(runtime)
    assert str(ALICE) not in formed, formed
    assert any("Bianchi" in text for text in formed[str(BOB)])  # Bob's exchange in the same channel forms
    status = await fake_discord.command(
        "memory status", user=ALICE, guild=GUILD, channel=CHANNEL, personality="sage"
    )
    assert "Pending: 0 messages" in status.text

    # What Alice says after the reset is remembered as usual.
    await chat.say(ALICE, "My sister Leila lives in Porto.")
    await runtime.memory.form_pending()
    alice = (await memories_of(runtime))[str(ALICE)]
    assert any("Leila" in text for text in alice)
    assert not any("Mochi" in text or "4921" in text for text in alice), alice
