"""One fake Discord: a real HTTP server and gateway on 127.0.0.1 that the shipped bot logs in to and
connects to as it does to Discord (its own aiohttp client, its own zlib-compressed websocket), with a
guild, channels, DMs and users that say things, run slash commands and press buttons.

The bot is `bot.client.PersonaeBot` with its extension list, started with `start()` as `personae run`
starts it. Only Discord's addresses change: its API's (`discord.http.Route.BASE`, the class attribute
discord.py itself sets when its API version changes) and its gateway's for a process given its shards
(`DiscordWebSocket.DEFAULT_GATEWAY`); otherwise the gateway's comes, as from Discord, from GET
/gateway/bot. Users act through the gateway (MESSAGE_CREATE, INTERACTION_CREATE); the bot
answers over REST, and the server keeps what users would see: messages after every edit, reactions,
webhooks, interaction responses, published commands, application emojis. `fail()` makes the next
matching request fail as Discord does (a status and an error body). Every action returns once the bot
has handled it, the background work it spawned included (the catch-up timer, if on, excepted).

The package's rooms: `records` (ids and what is kept), `state` (the world), `gateway` (the websocket
and waiting for the bot), `rest` (the HTTP API and the CDN), `users` (what users do) and `server`
(`FakeDiscord` itself, which joins them).
"""

from testkit.fake_discord.records import (
    APP_ID,
    BOT_ID,
    BOT_ROLE,
    CHANNEL,
    EVERYONE_ROLE,
    GUILD,
    PLAIN_CHANNEL,
    TOKEN,
    Attachment,
    Emoji,
    InteractionRecord,
    Invocation,
    Request,
    SentMessage,
    Webhook,
)
from testkit.fake_discord.server import FakeDiscord, running_bot

__all__ = [
    "APP_ID",
    "BOT_ID",
    "BOT_ROLE",
    "CHANNEL",
    "EVERYONE_ROLE",
    "GUILD",
    "PLAIN_CHANNEL",
    "TOKEN",
    "Attachment",
    "Emoji",
    "FakeDiscord",
    "InteractionRecord",
    "Invocation",
    "Request",
    "SentMessage",
    "Webhook",
    "running_bot",
]
