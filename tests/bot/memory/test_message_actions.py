""" "Remember this" and "Forget this" on the fake Discord: message menus (right-click a message, Apps)
run by users, with the chat, memory and formation services behind them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from bot.client import CommandPublisher, sync_command_tree
from bot.runtime import Runtime
from memory.chat.service import ChatRequest
from models import Memory, Message, Personality
from testkit.fake_discord import CHANNEL, GUILD, TOKEN, FakeDiscord, SentMessage

ALICE = 201
BOB = 202
SAGE_WEBHOOK = 770000000000000001
NOT_YOURS = "That's not your memory."


class Chat:
    """Alice and Bob talking with Sage: each message in Discord and in the log as the catch-up stores what
    it finds in a channel's history (Sage's reply through its webhook), the exchange left to form."""

    def __init__(self, runtime: Runtime, discord: FakeDiscord, sage: Personality) -> None:
        self.runtime, self.discord, self.sage = runtime, discord, sage

    async def say(
        self, user: int, text: str, *, dm: bool = False, answered: bool = True
    ) -> tuple[SentMessage, SentMessage | None]:
        """The user's message and Sage's reply, as messages a user can right-click."""
        discord = self.discord
        said = discord.said_while_away(text, user=user, channel=CHANNEL, dm=dm, ago=timedelta(0))
        request = ChatRequest(
            personality_id=self.sage.id,
            user_id=str(user),
            user_name=f"user{user}",
            guild_id=None if dm else str(GUILD),
            channel_id=str(said.channel_id),
            message_id=str(said.id),
            text=text,
        )
        async with self.runtime.chat.catching_up(str(said.channel_id)) as filing:
            await filing.message(request)
            if not answered:
                return said, None
            text = f"Sage's answer to: {text}"
            answer = discord.sent_while_away(text, channel=said.channel_id, name="Sage", webhook=SAGE_WEBHOOK)
            await filing.reply(self.sage.id, str(answer.id), text)
        return said, answer


@pytest.fixture
def chat(runtime: Runtime, fake_discord: FakeDiscord, sage: Personality) -> Chat:
    return Chat(runtime, fake_discord, sage)


async def stored(runtime: Runtime) -> tuple[list[Memory], dict[str, Message]]:
    async with runtime.sessionmaker() as session:
        memories = list((await session.scalars(select(Memory).order_by(Memory.occurred_at))).all())
        messages = {m.external_id: m for m in (await session.scalars(select(Message))).all()}
    return memories, messages


async def test_remember_this_forms_the_exchange_at_once_and_pins_it(
    fake_discord: FakeDiscord, runtime: Runtime, chat: Chat, sage: Personality
) -> None:
    said, _ = await chat.say(ALICE, "My sister Leila moved to Porto with her cat Mochi.")
    other, _ = await chat.say(ALICE, "I like rainy days.")
    assert (await stored(runtime))[0] == []  # pending: no formation has run

    done = await fake_discord.message_command("Remember this", said, user=ALICE)
    assert done.reply.ephemeral and "Remembered and pinned" in done.text
    memories, _ = await stored(runtime)
    # Formation ran for the conversation: both exchanges, only the one asked for pinned.
    pinned = [m for m in memories if m.pinned]
    assert len(memories) == 2 and len(pinned) == 1
    assert pinned[0].source_message_ids[0] == str(said.id) and pinned[0].state == "indexed"
    # The 📝 a remembered message gets after a reply, on each message formation just remembered.
    assert {(c, m) for c, m, _ in fake_discord.reactions} == {
        (CHANNEL, said.id),
        (CHANNEL, other.id),
    }
    assert {e for _, _, e in fake_discord.reactions} == {"📝"}
    found = await runtime.memory.recall(
        personality_id=sage.id, user_id=str(ALICE), query="Where did Leila move?"
    )
    assert found[0].id == pinned[0].id and found[0].pinned

    # Asked again (already formed): it stays one pinned memory, nothing formed twice.
    again = await fake_discord.message_command("Remember this", said, user=ALICE)
    assert "Remembered and pinned" in again.text
    assert [(m.id, m.pinned) for m in (await stored(runtime))[0]] == [(m.id, m.pinned) for m in memories]


async def test_remember_this_on_the_reply_and_only_by_whoever_was_answered(
    fake_discord: FakeDiscord, runtime: Runtime, chat: Chat
) -> None:
    said, answer = await chat.say(ALICE, "My dog Biscuit turns four in May.")
    assert answer is not None
    refused = await fake_discord.message_command("Remember this", answer, user=BOB)
    assert refused.reply.ephemeral and refused.text == NOT_YOURS
    assert (await fake_discord.message_command("Remember this", said, user=BOB)).text == NOT_YOURS
    assert (await stored(runtime))[0] == []  # a refusal forms nothing
    done = await fake_discord.message_command("Remember this", answer, user=ALICE)
    assert "Remembered and pinned" in done.text
    [memory] = (await stored(runtime))[0]
    assert memory.pinned and memory.user_id == str(ALICE)
    assert memory.source_message_ids == [str(said.id), str(answer.id)]


async def test_forget_this_removes_the_memory_and_the_exchange_never_comes_back(
    fake_discord: FakeDiscord, runtime: Runtime, chat: Chat, sage: Personality
) -> None:
    said, answer = await chat.say(ALICE, "My locker code is 4711, do not tell anyone.")
    kept, _ = await chat.say(ALICE, "I adore the violin.")
    assert answer is not None
    await runtime.memory.form_pending()
    memories, _ = await stored(runtime)
    [secret] = [m for m in memories if str(said.id) in m.source_message_ids]

    assert (await fake_discord.message_command("Forget this", answer, user=BOB)).text == NOT_YOURS
    done = await fake_discord.message_command("Forget this", answer, user=ALICE)
    assert done.reply.ephemeral
    assert done.text == "Forgot 1 memory of this exchange; it will never be remembered again."
    memories, messages = await stored(runtime)
    assert {m.id: m.state for m in memories}[secret.id] == "deleted"
    assert messages[str(said.id)].memory_excluded == messages[str(answer.id)].memory_excluded == "forgotten"
    assert messages[str(kept.id)].memory_excluded is None
    assert secret.id not in await runtime.memory._store.index.ids(sage.id)
    # Formed again from the log (a catch-up, a worker): never.
    async with runtime.sessionmaker.begin() as session:
        await session.execute(update(Message).values(memory_processed_at=None))
    await runtime.memory.form_pending()
    memories, _ = await stored(runtime)
    assert [m.state for m in memories if str(said.id) in m.source_message_ids] == ["deleted"]
    recalled = await runtime.memory.recall(
        personality_id=sage.id, user_id=str(ALICE), query="locker code 4711"
    )
    assert all("4711" not in m.content for m in recalled)

    # An exchange not formed yet is forgotten before it ever is.
    early, _ = await chat.say(ALICE, "My bank PIN is 0000.")
    pending = await fake_discord.message_command("Forget this", early, user=ALICE)
    assert pending.text == "This exchange had no memory yet; it will never be remembered again."
    await runtime.memory.form_pending()
    assert all(str(early.id) not in m.source_message_ids for m in (await stored(runtime))[0])

    # Remember this takes a Forget this back: the user asked for it.
    back = await fake_discord.message_command("Remember this", said, user=ALICE)
    assert "Remembered and pinned" in back.text
    memories, messages = await stored(runtime)
    [revived] = [m for m in memories if str(said.id) in m.source_message_ids]
    assert revived.state == "indexed" and revived.pinned and "4711" in revived.content
    assert messages[str(said.id)].memory_excluded is None


async def test_messages_the_bot_never_logged_or_not_yet_answered(
    fake_discord: FakeDiscord, runtime: Runtime, chat: Chat
) -> None:
    stranger = fake_discord.said_while_away("just chatting", user=ALICE, ago=timedelta(0))
    for name in ("Remember this", "Forget this"):
        unknown = await fake_discord.message_command(name, stranger, user=ALICE)
        assert unknown.reply.ephemeral and "I have no record of that message" in unknown.text
    waiting, _ = await chat.say(ALICE, "Are you there?", answered=False)
    early = await fake_discord.message_command("Remember this", waiting, user=ALICE)
    assert early.reply.ephemeral and "no reply yet" in early.text
    assert (await stored(runtime))[0] == []


async def test_remember_and_forget_in_a_dm(fake_discord: FakeDiscord, runtime: Runtime, chat: Chat) -> None:
    said, answer = await chat.say(ALICE, "My favourite tea is lapsang souchong.", dm=True)
    assert answer is not None
    done = await fake_discord.message_command("Remember this", answer, user=ALICE)
    assert done.reply.ephemeral and "Remembered and pinned" in done.text
    [memory] = (await stored(runtime))[0]
    assert memory.pinned and memory.is_dm
    gone = await fake_discord.message_command("Forget this", said, user=ALICE)
    assert gone.text.startswith("Forgot 1 memory")
    assert [m.state for m in (await stored(runtime))[0]] == ["deleted"]


async def test_the_context_menus_are_published_with_the_slash_commands(discord_world: FakeDiscord) -> None:
    async with CommandPublisher() as client:
        await client.login(TOKEN)  # loads the slash-command extensions, as `personae sync-commands` does
        await sync_command_tree(client, None)
        [(_, commands)] = discord_world.synced.items()
        menus = {c["name"]: c for c in commands if c.get("type") == 3}
        assert set(menus) == {"Remember this", "Forget this"}
        assert all(not c.get("description") for c in menus.values())
        # Unloading takes them out of the tree again.
        await client.unload_extension("bot.memory")
        assert client.tree.get_command("Remember this", type=3) is None  # type: ignore[call-overload]
