"""Catching up: what was said while the bot was away, read back on every (re)connect, stored,
remembered and answered when still recent (`MissedMessages`); memories a crash left, formed at start
and on a timer (`PendingMemories`). Storing is idempotent: a second read stores nothing twice."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import discord

from bot.chat.answering import MessageAnswerer
from bot.chat.senders import WebhookSender, can_use_webhooks, plain_header
from bot.reactions import RememberedReaction
from bot.tasks import BackgroundTasks
from memory.chat.service import (
    MISCONFIGURED_REPLY,
    NO_CHAT_MODEL,
    UNAVAILABLE_REPLY,
    Addressee,
    ChatService,
    MissedPlace,
    Route,
    deserves_answer,
)

if TYPE_CHECKING:
    from memory.service import MemoryService

log = logging.getLogger(__name__)

CATCH_UP_TASK = "chat-memory-catch-up"
# At most this many messages are read back per place and run; a run after it continues from there.
HISTORY_LIMIT = 500
NOTICES = (UNAVAILABLE_REPLY, MISCONFIGURED_REPLY, NO_CHAT_MODEL)
_HEADER = re.compile(r"\*\*(.+?)\*\*\n")


class PendingMemories:
    """Exchanges stored but not remembered (left by a crash, a restart or a failed pass) are formed at
    start-up, then on a timer, and their user messages get the 📝 wherever they were said."""

    def __init__(
        self,
        memory: MemoryService,
        chat: ChatService,
        reaction: RememberedReaction,
        tasks: BackgroundTasks,
        *,
        interval: float,
    ) -> None:
        self._memory = memory
        self._chat = chat
        self._reaction = reaction
        self._tasks = tasks
        self._interval = interval
        self._task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        """Start the timer (CATCH_UP_SECONDS; 0: no timer, `personae worker` forms memories instead)."""
        if self._interval > 0:
            self._task = self._tasks.spawn(self._loop(), name=CATCH_UP_TASK)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def form(self) -> int:
        """Form every pending memory and mark what was remembered; returns how many memories."""
        report = await self._memory.form_pending()
        if report.memories:
            log.info("Caught up on %d pending memories", report.memories)
        # Looked up in the log: a pass over every conversation names no channel.
        await self._reaction.add(await self._chat.remembered_places(report.remembered_message_ids))
        return report.memories

    async def _loop(self) -> None:
        while True:
            try:
                await self.form()
            except Exception:
                log.exception("Catching up on pending memory formation failed; retrying later")
            await asyncio.sleep(self._interval)


def _nothing_new(channel: discord.abc.Messageable, place: MissedPlace) -> bool:
    """Whether Discord says the channel's last message is one read already: no history to fetch."""
    last = getattr(channel, "last_message_id", None)
    return last is not None and place.after_message_id is not None and last <= place.after_message_id


@dataclass
class MissedReport:
    """What one run found: messages stored, replies stored, messages answered."""

    stored: int = 0
    replies: int = 0
    answered: int = 0


class MissedMessages:
    """Reads back what was said while the bot was offline."""

    def __init__(
        self,
        client: discord.AutoShardedClient,
        chat: ChatService,
        answerer: MessageAnswerer,
        tasks: BackgroundTasks,
        *,
        reply_minutes: float,
    ) -> None:
        self._client = client
        self._chat = chat
        self._answerer = answerer
        self._tasks = tasks
        self._reply_window = timedelta(minutes=reply_minutes)
        self._lock = asyncio.Lock()
        self._queued = False
        # Channel id -> the newest message read there by this process: chatter that named nobody (so
        # nothing of it was stored) is not read again at every reconnect.
        self._read_up_to: dict[str, int] = {}

    def read_soon(self) -> None:
        """Start a run in the background. READY comes again with every new session: one run waits for
        the other, and at most one more is queued (a run right after a run finds nothing new)."""
        if self._queued:
            return
        self._queued = True
        self._tasks.spawn(self._run(), name="chat-missed-messages")

    async def _run(self) -> None:
        async with self._lock:
            self._queued = False
            await self.read_all()

    async def read_all(self) -> MissedReport:
        """Read every place; one place failing (deleted, no access) does not stop the others."""
        report = MissedReport()
        for place in await self._chat.places_to_read(self._readable_channels()):
            channel = await self._channel(place.channel_id)
            read = self._read_up_to.get(place.channel_id)
            if read is not None and (place.after_message_id is None or read > place.after_message_id):
                place = dataclasses.replace(place, after_message_id=read)
            if channel is None or _nothing_new(channel, place):
                continue
            try:
                await self.read_place(channel, place, report)
            except discord.HTTPException as exc:
                log.warning("Could not read the history of channel %s: %s", place.channel_id, exc)
            except Exception:
                log.exception("Reading what was missed in channel %s failed", place.channel_id)
        if report.stored or report.replies:
            log.info(
                "Read back %d missed messages and %d replies; answered %d",
                report.stored,
                report.replies,
                report.answered,
            )
        return report

    def _readable_channels(self) -> dict[str, list[str]]:
        """Guild id -> the text channels and threads of this process's guilds whose history the bot may
        read: what was said to a personality by name there is read back, bound or not."""
        readable: dict[str, list[str]] = {}
        for guild in self._client.guilds:
            me = guild.me
            if me is not None:
                channels: list[discord.TextChannel | discord.Thread] = [*guild.text_channels, *guild.threads]
                readable[str(guild.id)] = [
                    str(c.id) for c in channels if c.permissions_for(me).read_message_history
                ]
        return readable

    async def _channel(self, channel_id: str) -> discord.abc.Messageable | None:
        """The channel when this process serves it: a guild channel of one of its shards' guilds, or a
        DM when it runs shard 0 (Discord sends every DM there). Another process reads the rest, so two
        bot processes never store or answer the same missed message twice."""
        bot = self._client
        channel = bot.get_channel(int(channel_id))
        if channel is None:  # DM channels are not cached after a restart
            try:
                channel = await bot.fetch_channel(int(channel_id))
            except discord.HTTPException as exc:
                log.debug("Channel %s is out of reach: %s", channel_id, exc)
                return None
        guild = getattr(channel, "guild", None)
        if guild is not None and bot.get_guild(guild.id) is None:
            return None  # a guild of another process's shards
        if guild is None and bot.shard_ids is not None and 0 not in bot.shard_ids:
            return None
        return channel if isinstance(channel, discord.abc.Messageable) else None

    async def read_place(
        self, channel: discord.abc.Messageable, place: MissedPlace, report: MissedReport
    ) -> None:
        """Store what was missed here, answer what is recent, then remember it."""
        after: discord.abc.Snowflake | datetime | None = (
            discord.Object(place.after_message_id) if place.after_message_id is not None else place.since
        )
        found = [m async for m in channel.history(limit=HISTORY_LIMIT, after=after, oldest_first=True)]
        missed = sorted(
            (m for m in found if place.after_message_id is None or m.id > place.after_message_id),
            key=lambda m: m.id,
        )
        to_answer: dict[tuple[int, int], tuple[discord.Message, Route]] = {}
        now = datetime.now(UTC)
        replier: Addressee | None = None
        # The domain files what is read (memory.chat.catching_up) and holds it from formation while the
        # history is read: a message to be answered waits for its own reply, not an earlier one. Once
        # read, only the messages answered stay held, so an answer takes its author's older lines into
        # its memory; when the place is done, what was filed is formed.
        async with self._chat.catching_up(place.channel_id) as filing:
            # Refused live (the flood limit): stored as refused, never answered; read on past it.
            refused = await filing.refused([str(m.id) for m in missed])
            for message in missed:
                if str(message.id) in refused:
                    continue
                # A reply the plain sender split goes on without its header, right after its first part.
                replier = await self.reply_author(message, channel) or self._continued(message, replier)
                if replier is not None:
                    text = message.content
                    if message.webhook_id is None:
                        text = text.removeprefix(plain_header(replier.display_name))
                    answered = await filing.reply(replier.id, str(message.id), text)
                    if answered is not None:
                        report.replies += 1
                        # The user it answered needs no answer from this personality now.
                        to_answer.pop((replier.id, int(answered)), None)
                    continue
                route = await self._answerer.route(message)
                if route is None:
                    continue
                await filing.message(self._answerer.request_of(message, route))
                report.stored += 1
                key = (route.personality.id, message.author.id)
                if deserves_answer(message.created_at, now=now, window=self._reply_window):
                    to_answer[key] = (message, route)
                else:
                    to_answer.pop(key, None)
            filing.answering(str(m.id) for m, _ in to_answer.values())
            for message, route in to_answer.values():
                await self._answerer.answer(message, route)  # forms and marks its conversation's memories
                report.answered += 1
        remembered = await filing.form()
        await self._answerer.reaction.add((place.channel_id, i) for i in remembered)
        if found:
            self._read_up_to[place.channel_id] = max(m.id for m in found)

    async def reply_author(
        self, message: discord.Message, channel: discord.abc.Messageable
    ) -> Addressee | None:
        """The personality whose reply this message is: posted through our webhook under its name, or
        by the bot under its name in bold (error notices are not replies)."""
        names = await self._chat.addressees()
        if message.webhook_id is not None:
            sender = self._answerer.senders.webhook
            if not isinstance(sender, WebhookSender) or not can_use_webhooks(channel):
                return None
            target = channel.parent if isinstance(channel, discord.Thread) else channel
            if message.webhook_id != await sender.known_webhook_id(target):  # type: ignore[arg-type]
                return None
            return next((a for a in names if a.display_name[:80] == message.author.name), None)
        me = self._client.user
        if me is None or message.author.id != me.id or _HEADER.match(message.content) is None:
            return None
        for addressee in names:
            header = plain_header(addressee.display_name)
            if message.content.startswith(header):
                body = message.content.removeprefix(header)
                return None if body in NOTICES else addressee
        return None

    def _continued(self, message: discord.Message, previous: Addressee | None) -> Addressee | None:
        me = self._client.user
        own = me is not None and message.author.id == me.id and message.webhook_id is None
        return previous if own and previous is not None else None
