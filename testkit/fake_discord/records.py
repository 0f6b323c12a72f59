"""What the fake Discord keeps and hands back: its fixed ids, the messages users see, webhooks,
emojis, interactions and the answers to them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from testkit import discord_payloads as payloads
from testkit.discord_payloads import EPHEMERAL

if TYPE_CHECKING:
    from testkit.fake_discord.state import DiscordState

APP_ID = 700000000000000001
BOT_ID = 700000000000000002
GUILD = 300
CHANNEL = 500  # the bot may manage webhooks here: replies come under each personality's name
PLAIN_CHANNEL = 501  # it may not: replies come as its own messages, the name in bold
EVERYONE_ROLE = GUILD
BOT_ROLE = 301
TOKEN = "fake-discord-token"


@dataclass
class Attachment:
    filename: str
    data: bytes
    size: int | None = None  # what the upload says its size is (a client may say more than it sends)


@dataclass
class SentMessage:
    """A message as users see it after every edit so far."""

    id: int
    channel_id: int
    author: dict[str, Any]
    content: str = ""
    flags: int = 0
    components: list[dict[str, Any]] = field(default_factory=list)
    embeds: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    webhook_id: int | None = None
    reference: dict[str, Any] | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    edits: int = 0

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)

    @property
    def components_flat(self) -> list[dict[str, Any]]:
        return [c for row in self.components for c in row.get("components", [])]

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return [c for c in self.components_flat if c.get("type") == 2]

    def payload(self, guild_id: int | None = None) -> dict[str, Any]:
        data = payloads.message(
            self.id,
            channel_id=self.channel_id,
            content=self.content,
            author=self.author,
            timestamp=self.created_at.isoformat(),
            attachments=[
                {
                    "id": str(self.id * 10 + i),
                    "filename": a.filename,
                    "size": len(a.data),
                    "url": f"https://cdn.example/{a.filename}",
                    "proxy_url": f"https://cdn.example/{a.filename}",
                }
                for i, a in enumerate(self.attachments)
            ],
            embeds=self.embeds,
            flags=self.flags,
            components=self.components,
        )
        if self.webhook_id is not None:
            data["webhook_id"] = str(self.webhook_id)
        if self.reference is not None:
            data["message_reference"] = self.reference
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
        return data


@dataclass(frozen=True)
class Request:
    """A request the bot made: method, path (from /api/v10 on), and its JSON body."""

    method: str
    path: str
    payload: Any


@dataclass
class Webhook:
    id: int
    token: str
    channel_id: int
    name: str


@dataclass
class Emoji:
    id: int
    name: str
    image: str

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "name": self.name,
            "animated": False,
            "require_colons": True,
            "managed": False,
            "available": True,
            "roles": [],
        }


@dataclass
class InteractionRecord:
    """An interaction sent to the bot, and what it answered."""

    id: int
    kind: int
    channel_id: int
    original: int | None = None  # the message a component is on, or the response message
    created: list[int] = field(default_factory=list)
    choices: list[dict[str, Any]] | None = None
    modal: dict[str, Any] | None = None


@dataclass
class Failure:
    """The next request whose "METHOD /path" matches `pattern` gets this error."""

    pattern: re.Pattern[str]
    status: int
    code: int
    message: str


@dataclass
class Invocation:
    """One interaction a user sent, and what the bot answered."""

    token: str
    discord: DiscordState

    @property
    def record(self) -> InteractionRecord:
        return self.discord.interactions[self.token]

    @property
    def replies(self) -> list[SentMessage]:
        """Messages this interaction created and that still exist: its response, then follow-ups."""
        return [self.discord.messages[i] for i in self.record.created if i in self.discord.messages]

    @property
    def original(self) -> SentMessage:
        """The interaction's original message (for a button press: the message the button is on)."""
        assert self.record.original is not None, "the bot did not answer"
        return self.discord.messages[self.record.original]

    @property
    def reply(self) -> SentMessage:
        """The last message this interaction produced (the answer the user reads)."""
        replies = self.replies
        return replies[-1] if replies else self.original

    @property
    def text(self) -> str:
        return self.reply.content

    @property
    def choices(self) -> list[dict[str, Any]]:
        assert self.record.choices is not None, "the bot offered no choices"
        return self.record.choices

    @property
    def modal(self) -> dict[str, Any]:
        assert self.record.modal is not None, "the bot opened no modal"
        return self.record.modal
