""" "Remember this" and "Forget this" through the real command tree: message context menus on real
Interaction objects, with the chat, memory and formation services behind them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select, update

from bot.client import CommandPublisher, sync_command_tree
from memory.chat.service import ChatReply, ChatRequest
from models import Memory, Message, Personality
from tests.bot.interactions import SLASH_COMMAND_EXTENSIONS, DiscordHarness, open_harness

ALICE = 201
BOB = 202
GUILD = 300
CHANNEL = 500
DM_CHANNEL = 600
SAGE_WEBHOOK = 770000000000000001
NOT_YOURS = "That's not your memory."


@pytest.fixture
async def harness(runtime: Any) -> AsyncIterator[DiscordHarness]:
    async with open_harness(runtime, SLASH_COMMAND_EXTENSIONS) as harness:
        yield harness


@pytest.fixture
async def sage(runtime: Any) -> Personality:
    personality, _ = await runtime.personalities.create("Sage", prompt="You are Sage.")
    return personality


class Chat:
    """Alice and Bob talking with Sage as the chat cog would log it: each message and reply by its
    Discord id, the exchange left pending for formation."""

    def __init__(self, runtime: Any, harness: DiscordHarness, sage: Personality) -> None:
        self.runtime, self.harness, self.sage = runtime, harness, sage
        self.ids = iter(range(910000000000000001, 910000000000001000))

    async def say(
        self,
        user: int,
        text: str,
        *,
        guild: int | None = GUILD,
        channel: int = CHANNEL,
        answered: bool = True,
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The user's message and Sage's reply, as Discord message payloads a user can right-click."""
        said_id, reply_id = next(self.ids), next(self.ids)
        request = ChatRequest(
            personality_id=self.sage.id,
            user_id=str(user),
            user_name=f"user{user}",
            guild_id=str(guild) if guild else None,
            channel_id=str(channel),
            message_id=str(said_id),
            text=text,
        )
        said = self.harness.message_payload(said_id, channel=channel, content=text, author=user, guild=guild)
        if not answered:
            await self.runtime.chat.store_user_message(request)
            return said, None
        # Stored as the catch-up stores a reply it finds: in the log, its memory not formed yet.
        prepared = await self.runtime.chat.store_user_message(request)
        reply = ChatReply(f"Sage's answer to: {text}", ok=True, prepared=prepared)
        await self.runtime.chat.record_reply(reply, [(str(reply_id), reply.text)])
        answer = self.harness.message_payload(
            reply_id, channel=channel, content=reply.text, author=SAGE_WEBHOOK, webhook="Sage", guild=guild
        )
        return said, answer


@pytest.fixture
def chat(runtime: Any, harness: DiscordHarness, sage: Personality) -> Chat:
    return Chat(runtime, harness, sage)


async def stored(runtime: Any) -> tuple[list[Memory], dict[str, Message]]:
    async with runtime.sessionmaker() as session:
        memories = list((await session.scalars(select(Memory).order_by(Memory.occurred_at))).all())
        messages = {m.external_id: m for m in (await session.scalars(select(Message))).all()}
    return memories, messages


async def test_remember_this_forms_the_exchange_at_once_and_pins_it(
    harness: DiscordHarness, runtime: Any, chat: Chat, sage: Personality
) -> None:
    said, _ = await chat.say(ALICE, "My sister Leila moved to Porto with her cat Mochi.")
    other, _ = await chat.say(ALICE, "I like rainy days.")
    assert (await stored(runtime))[0] == []  # pending: no formation has run

    done = await harness.message_command("Remember this", said, user=ALICE, guild=GUILD)
    assert done.reply.ephemeral and "Remembered and pinned" in done.text
    memories, _ = await stored(runtime)
    # Formation ran for the conversation: both exchanges, only the one asked for pinned.
    pinned = [m for m in memories if m.pinned]
    assert len(memories) == 2 and len(pinned) == 1
    assert pinned[0].source_message_ids[0] == said["id"] and pinned[0].state == "indexed"
    # The 📝 a remembered message gets after a reply, on each message formation just remembered.
    assert {(c, m) for c, m, _ in harness.http.reactions} == {
        (CHANNEL, int(said["id"])),
        (CHANNEL, int(other["id"])),
    }
    assert {e for _, _, e in harness.http.reactions} == {"📝"}
    found = await runtime.memory.recall(
        personality_id=sage.id, user_id=str(ALICE), query="Where did Leila move?"
    )
    assert found[0].id == pinned[0].id and found[0].pinned

    # Asked again (already formed): it stays one pinned memory, nothing formed twice.
    again = await harness.message_command("Remember this", said, user=ALICE, guild=GUILD)
    assert "Remembered and pinned" in again.text
    assert [(m.id, m.pinned) for m in (await stored(runtime))[0]] == [(m.id, m.pinned) for m in memories]


async def test_remember_this_on_the_reply_and_only_by_whoever_was_answered(
    harness: DiscordHarness, runtime: Any, chat: Chat
) -> None:
    said, answer = await chat.say(ALICE, "My dog Biscuit turns four in May.")
    assert answer is not None
    refused = await harness.message_command("Remember this", answer, user=BOB, guild=GUILD)
    assert refused.reply.ephemeral and refused.text == NOT_YOURS
    assert (await harness.message_command("Remember this", said, user=BOB, guild=GUILD)).text == NOT_YOURS
    assert (await stored(runtime))[0] == []  # a refusal forms nothing
    done = await harness.message_command("Remember this", answer, user=ALICE, guild=GUILD)
    assert "Remembered and pinned" in done.text
    [memory] = (await stored(runtime))[0]
    assert memory.pinned and memory.user_id == str(ALICE)
    assert memory.source_message_ids == [said["id"], answer["id"]]


async def test_forget_this_removes_the_memory_and_the_exchange_never_comes_back(
    harness: DiscordHarness, runtime: Any, chat: Chat, sage: Personality
) -> None:
    said, answer = await chat.say(ALICE, "My locker code is 4711, do not tell anyone.")
    kept, _ = await chat.say(ALICE, "I adore the violin.")
    assert answer is not None
    await runtime.memory.form_pending()
    memories, _ = await stored(runtime)
    [secret] = [m for m in memories if said["id"] in m.source_message_ids]

    assert (await harness.message_command("Forget this", answer, user=BOB, guild=GUILD)).text == NOT_YOURS
    done = await harness.message_command("Forget this", answer, user=ALICE, guild=GUILD)
    assert done.reply.ephemeral
    assert done.text == "Forgot 1 memory of this exchange; it will never be remembered again."
    memories, messages = await stored(runtime)
    assert {m.id: m.state for m in memories}[secret.id] == "deleted"
    assert messages[said["id"]].memory_excluded == messages[answer["id"]].memory_excluded == "forgotten"
    assert messages[kept["id"]].memory_excluded is None
    assert secret.id not in await runtime.memory._store.index.ids(sage.id)
    # Formed again from the log (a catch-up, a worker): never.
    async with runtime.sessionmaker.begin() as session:
        await session.execute(update(Message).values(memory_processed_at=None))
    await runtime.memory.form_pending()
    memories, _ = await stored(runtime)
    assert [m.state for m in memories if said["id"] in m.source_message_ids] == ["deleted"]
    recalled = await runtime.memory.recall(
        personality_id=sage.id, user_id=str(ALICE), query="locker code 4711"
    )
    assert all("4711" not in m.content for m in recalled)

    # An exchange not formed yet is forgotten before it ever is.
    early, _ = await chat.say(ALICE, "My bank PIN is 0000.")
    pending = await harness.message_command("Forget this", early, user=ALICE, guild=GUILD)
    assert pending.text == "This exchange had no memory yet; it will never be remembered again."
    await runtime.memory.form_pending()
    assert all(early["id"] not in m.source_message_ids for m in (await stored(runtime))[0])

    # Remember this takes a Forget this back: the user asked for it.
    back = await harness.message_command("Remember this", said, user=ALICE, guild=GUILD)
    assert "Remembered and pinned" in back.text
    memories, messages = await stored(runtime)
    [revived] = [m for m in memories if said["id"] in m.source_message_ids]
    assert revived.state == "indexed" and revived.pinned and "4711" in revived.content
    assert messages[said["id"]].memory_excluded is None


async def test_messages_the_bot_never_logged_or_not_yet_answered(
    harness: DiscordHarness, runtime: Any, chat: Chat
) -> None:
    stranger = harness.message_payload(
        919999999999999999, channel=CHANNEL, content="just chatting", author=ALICE, guild=GUILD
    )
    for name in ("Remember this", "Forget this"):
        unknown = await harness.message_command(name, stranger, user=ALICE, guild=GUILD)
        assert unknown.reply.ephemeral and "I have no record of that message" in unknown.text
    waiting, _ = await chat.say(ALICE, "Are you there?", answered=False)
    early = await harness.message_command("Remember this", waiting, user=ALICE, guild=GUILD)
    assert early.reply.ephemeral and "no reply yet" in early.text
    assert (await stored(runtime))[0] == []


async def test_remember_and_forget_in_a_dm(harness: DiscordHarness, runtime: Any, chat: Chat) -> None:
    said, answer = await chat.say(
        ALICE, "My favourite tea is lapsang souchong.", guild=None, channel=DM_CHANNEL
    )
    assert answer is not None
    done = await harness.message_command("Remember this", answer, user=ALICE)
    assert done.reply.ephemeral and "Remembered and pinned" in done.text
    [memory] = (await stored(runtime))[0]
    assert memory.pinned and memory.is_dm
    gone = await harness.message_command("Forget this", said, user=ALICE)
    assert gone.text.startswith("Forgot 1 memory")
    assert [m.state for m in (await stored(runtime))[0]] == ["deleted"]


async def test_the_context_menus_are_published_with_the_slash_commands() -> None:
    async with CommandPublisher() as client:
        await client.setup_hook()
        harness = DiscordHarness(client, client.tree)
        await sync_command_tree(client, None)
        [(_, commands)] = harness.http.synced.items()
        menus = {c["name"]: c for c in commands if c.get("type") == 3}
        assert set(menus) == {"Remember this", "Forget this"}
        assert all(not c.get("description") for c in menus.values())
        # Unloading takes them out of the tree again.
        await client.unload_extension("bot.memory")
        assert client.tree.get_command("Remember this", type=3) is None  # type: ignore[call-overload]
