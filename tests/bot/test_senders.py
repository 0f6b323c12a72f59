"""The reply senders: one reused webhook per channel (a thread posts through its parent's), the bot's
own messages as the fallback, Discord's length limit and no pings either way."""

from __future__ import annotations

from typing import Any
from unittest.mock import AsyncMock, MagicMock

import discord

from bot.chat.senders import PlainSender, WebhookSender, sent_parts


def fake_webhook(ids: list[int]) -> MagicMock:
    webhook = MagicMock(spec=discord.Webhook)
    webhook.name = "TestBot personalities"
    webhook.token = "token"

    async def send(content: str, **kwargs: Any) -> MagicMock:
        sent = MagicMock(spec=discord.WebhookMessage)
        sent.id = 9_000_000 + len(ids)
        sent.content = content
        ids.append(sent.id)
        return sent

    webhook.send = AsyncMock(side_effect=send)
    return webhook


async def test_webhook_sender_reuses_one_webhook_and_uses_the_parent_for_threads() -> None:
    ids: list[int] = []
    existing = fake_webhook(ids)
    parent = MagicMock(spec=discord.TextChannel)
    parent.id = 10
    parent.webhooks = AsyncMock(return_value=[existing])
    parent.create_webhook = AsyncMock()
    thread = MagicMock(spec=discord.Thread)
    thread.id = 11
    thread.parent = parent
    sender = WebhookSender("TestBot personalities")
    await sender.send(parent, "one", name="Lilith", avatar_url="https://example.com/a.png")
    await sender.send(thread, "two", name="Lilith", avatar_url=None)
    parent.webhooks.assert_awaited_once()
    parent.create_webhook.assert_not_awaited()
    assert existing.send.await_args_list[0].kwargs["avatar_url"] == "https://example.com/a.png"
    assert existing.send.await_args_list[1].kwargs["thread"] is thread


async def test_webhook_sender_creates_a_webhook_when_none_is_ours() -> None:
    ids: list[int] = []
    created = fake_webhook(ids)
    foreign = MagicMock(spec=discord.Webhook)
    foreign.name = "someone else"
    foreign.token = "t"
    channel = MagicMock(spec=discord.TextChannel)
    channel.id = 20
    channel.webhooks = AsyncMock(return_value=[foreign])
    channel.create_webhook = AsyncMock(return_value=created)
    sent = await WebhookSender("TestBot personalities").send(
        channel, "x" * 4500, name="Sage", avatar_url=None
    )
    channel.create_webhook.assert_awaited_once_with(name="TestBot personalities")
    assert len(sent) == 3


async def test_plain_sender_keeps_the_header_within_the_limit() -> None:
    channel = MagicMock(spec=discord.TextChannel)
    channel.send = AsyncMock(side_effect=lambda content, **kwargs: MagicMock(content=content))
    sent = await PlainSender().send(channel, "y" * 3990, name="Lilith", avatar_url=None)
    contents = [call.args[0] for call in channel.send.await_args_list]
    assert contents[0].startswith("**Lilith**\n")
    assert all(len(c) <= 2000 for c in contents)
    assert len(sent) == 3
    assert all(
        call.kwargs["allowed_mentions"].to_dict() == {"parse": []} for call in channel.send.await_args_list
    )


def test_sent_parts_store_the_text_without_the_plain_header() -> None:
    first = MagicMock(id=1, content="**Lilith**\nHello there.", webhook_id=None)
    second = MagicMock(id=2, content="More.", webhook_id=None)
    assert sent_parts([first, second], "Hello there. More.", name="Lilith") == [
        ("1", "Hello there."),
        ("2", "More."),
    ]


def test_sent_parts_keep_a_reply_that_begins_with_a_bold_line() -> None:
    # Only the header the plain sender put there is taken off, never the reply's own first line.
    through_webhook = MagicMock(spec=discord.WebhookMessage, id=3, content="**Plan:**\nWater the tomatoes")
    assert sent_parts([through_webhook], "**Plan:**\nWater the tomatoes", name="Lilith") == [
        ("3", "**Plan:**\nWater the tomatoes")
    ]
    as_the_bot = MagicMock(id=4, content="**Lilith**\n**Plan:**\nWater the tomatoes", webhook_id=None)
    assert sent_parts([as_the_bot], "**Plan:**\nWater the tomatoes", name="Lilith") == [
        ("4", "**Plan:**\nWater the tomatoes")
    ]


async def test_webhook_sender_replaces_a_reply_in_a_thread_part_by_part() -> None:
    ids: list[int] = []
    webhook = fake_webhook(ids)
    webhook.edit_message = AsyncMock(side_effect=lambda message_id, **kwargs: MagicMock(id=message_id))
    webhook.delete_message = AsyncMock()
    parent = MagicMock(spec=discord.TextChannel)
    parent.id = 30
    parent.webhooks = AsyncMock(return_value=[webhook])
    thread = MagicMock(spec=discord.Thread)
    thread.id = 31
    thread.parent = parent
    view = discord.ui.View()
    sender = WebhookSender("TestBot personalities")
    # Three old parts, one new: the first edited (the view on it), the other two deleted, in the thread.
    replaced = await sender.replace(
        thread, [1, 2, 3], "Short now.", name="Lilith", avatar_url=None, view=view
    )
    assert [m.id for m in replaced] == [1]
    [edit] = webhook.edit_message.await_args_list
    assert edit.args == (1,) and edit.kwargs["content"] == "Short now."
    assert edit.kwargs["view"] is view and edit.kwargs["thread"] is thread
    assert [c.args for c in webhook.delete_message.await_args_list] == [(2,), (3,)]
    assert all(c.kwargs["thread"] is thread for c in webhook.delete_message.await_args_list)
    # One old part, three new: the first edited without the view, two sent after it, the view on the last.
    webhook.edit_message.reset_mock()
    replaced = await sender.replace(thread, [1], "x" * 4500, name="Lilith", avatar_url=None, view=view)
    assert len(replaced) == 3 and webhook.edit_message.await_args.kwargs["view"] is None
    sends = webhook.send.await_args_list
    assert [c.kwargs.get("view") for c in sends] == [discord.utils.MISSING, view]
    assert all(c.kwargs["thread"] is thread and c.kwargs["username"] == "Lilith" for c in sends)
