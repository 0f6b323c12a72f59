"""The fake Discord on its own, against discord.py's own client (not the Personae bot): it logs in,
connects and gets READY with the guild; users' messages and interactions arrive as events; what the
client sends is kept as users would see it; failures, reconnections and shards behave as Discord's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import discord
import pytest
from discord import app_commands
from discord.ext import commands

from testkit.fake_discord import BOT_ID, CHANNEL, GUILD, PLAIN_CHANNEL, Attachment, FakeDiscord

ALICE = 201


class Client(commands.AutoShardedBot):
    """A plain discord.py bot that records what reaches it, with one command, one view and a modal."""

    def __init__(self, **options: Any) -> None:
        intents = discord.Intents.default()
        intents.message_content = True
        super().__init__(command_prefix="!", intents=intents, **options)
        self.seen: list[discord.Message] = []
        self.resumed = 0
        self.background = None

    async def setup_hook(self) -> None:
        @self.tree.command(name="echo", description="Say it back")
        @app_commands.describe(text="What to say", file="A file to look at")
        async def echo(
            interaction: discord.Interaction[Any], text: str, file: discord.Attachment | None = None
        ) -> None:
            size = len(await file.read()) if file is not None else 0
            view = discord.ui.View(timeout=None)
            button: discord.ui.Button[Any] = discord.ui.Button(label="Again", custom_id="again")

            async def again(pressed: discord.Interaction[Any]) -> None:
                await pressed.response.edit_message(content=f"{text} {text}", view=None)

            button.callback = again  # type: ignore[method-assign, assignment]
            view.add_item(button)
            await interaction.response.send_message(f"{text} ({size} bytes)", view=view, ephemeral=True)
            await interaction.followup.send("and a follow-up")

        @echo.autocomplete("text")
        async def complete(
            interaction: discord.Interaction[Any], current: str
        ) -> list[app_commands.Choice[str]]:
            return [app_commands.Choice(name=f"{current}!", value=f"{current}!")]

    async def on_message(self, message: discord.Message) -> None:
        self.seen.append(message)

    async def on_resumed(self) -> None:
        self.resumed += 1


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


async def test_the_client_logs_in_connects_and_gets_the_guild(fake: FakeDiscord) -> None:
    client = Client()
    await fake.start(client)
    assert client.user is not None and client.user.id == BOT_ID
    guild = client.get_guild(GUILD)
    assert guild is not None and guild.me is not None
    text, plain = guild.get_channel(CHANNEL), guild.get_channel(PLAIN_CHANNEL)
    assert isinstance(text, discord.TextChannel) and isinstance(plain, discord.TextChannel)
    assert (
        text.permissions_for(guild.me).manage_webhooks and not plain.permissions_for(guild.me).manage_webhooks
    )
    assert [(r.method, r.path) for r in fake.requests[:3]] == [
        ("GET", "/users/@me"),
        ("GET", "/oauth2/applications/@me"),
        ("GET", "/gateway/bot"),
    ]


async def test_messages_arrive_and_what_the_client_sends_is_kept(fake: FakeDiscord) -> None:
    client = Client()
    await fake.start(client)
    said = await fake.say("hello", user=ALICE)
    in_dm = await fake.say("psst", user=ALICE, dm=True)
    first, second = client.seen
    assert (first.id, first.content, first.author.id, first.guild) == (
        said.id,
        "hello",
        ALICE,
        client.get_guild(GUILD),
    )
    assert (second.id, second.guild, second.channel.id) == (in_dm.id, None, fake.dm_channel(ALICE))
    channel = client.get_channel(CHANNEL)
    assert isinstance(channel, discord.TextChannel)
    sent = await channel.send("hi Alice", allowed_mentions=discord.AllowedMentions.none())
    await sent.add_reaction("📝")
    edited = await sent.edit(content="hi again")
    assert fake.in_channel(CHANNEL)[-1].content == "hi again" == edited.content
    assert fake.reactions == [(CHANNEL, sent.id, "📝")]
    assert fake.edits_of(sent.id) == [f"/channels/{CHANNEL}/messages/{sent.id}"]
    await sent.delete()
    assert fake.sent_by_bot(CHANNEL) == []


async def test_webhooks_post_under_a_name_and_into_threads(fake: FakeDiscord) -> None:
    client = Client()
    await fake.start(client)
    await fake.add_thread(4001, parent_id=CHANNEL)
    channel, thread = client.get_channel(CHANNEL), client.get_channel(4001)
    assert isinstance(channel, discord.TextChannel) and isinstance(thread, discord.Thread)
    hook = await channel.create_webhook(name="Personae personalities")
    assert [w.id for w in await channel.webhooks()] == [hook.id]
    posted = await hook.send("from Lilith", username="Lilith", wait=True, thread=thread)
    [kept] = fake.sent_by_bot(4001)
    assert (kept.id, kept.webhook_id, kept.author["username"]) == (posted.id, hook.id, "Lilith")


async def test_history_reads_what_was_said_while_away(fake: FakeDiscord) -> None:
    old = fake.said_while_away("before", ago=timedelta(hours=2))
    new = fake.said_while_away("after", ago=timedelta(minutes=1))
    client = Client()
    await fake.start(client)
    channel = client.get_channel(CHANNEL)
    assert isinstance(channel, discord.TextChannel)
    found = [m async for m in channel.history(after=discord.Object(old.id), oldest_first=True)]
    assert [m.id for m in found] == [new.id]
    assert client.seen == []  # no events for them


async def test_commands_answers_followups_buttons_and_choices(fake: FakeDiscord) -> None:
    client = Client()
    await fake.start(client)
    ran = await fake.command(
        "echo", user=ALICE, guild=GUILD, text="hey", attachments={"file": Attachment("a.txt", b"12345")}
    )
    response, followup = ran.replies
    assert (response.content, response.ephemeral) == ("hey (5 bytes)", True)
    assert (followup.content, followup.ephemeral) == ("and a follow-up", False)
    pressed = await fake.click(response, "Again", user=ALICE)
    assert pressed.original is response and response.content == "hey hey" and response.buttons == []
    choices = await fake.autocomplete("echo", "text", user=ALICE, text="he")
    assert choices.choices == [{"name": "he!", "value": "he!"}]


async def test_a_failure_is_discords_error_and_an_expired_interaction_is_unknown(
    fake: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    client = Client()
    await fake.start(client)
    channel = client.get_channel(CHANNEL)
    assert isinstance(channel, discord.TextChannel)
    fake.fail("POST", f"/channels/{CHANNEL}/messages", 403, 50013)
    with pytest.raises(discord.Forbidden) as refused:
        await channel.send("nope")
    assert refused.value.code == 50013
    await channel.send("yes")  # only the next one failed
    expired = await fake.command("echo", user=ALICE, expired=True, text="late")
    assert expired.replies == [] and "Unknown interaction" in caplog.text


async def test_a_reconnection_resumes_and_a_process_of_other_shards_gets_no_guild(fake: FakeDiscord) -> None:
    client = Client()
    await fake.start(client)
    await fake.reconnect()
    assert client.resumed == 1
    await fake.stop()
    other = Client(shard_count=2, shard_ids=[1])
    await fake.start(other)
    assert other.get_guild(GUILD) is None  # the guild is shard 0's
