"""Where an import's lines go: each to its personality, its venue's conversation, and for a reply the
user line it answers (see memory.transfer.importer's docstring for the rules); and, for a chat
imported whole (`replace_edited`), what the log holds of it that it no longer does replaced
(memory.transfer.kept_chat), its new lines kept in the conversation holding it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.conversations import (
    LoggedMessage,
    MessageIdCollision,
    Venue,
    ensure_conversation,
    store_messages,
)
from memory.errors import InvalidInputError
from memory.owners.personality_fields import slugify
from memory.tokens import count_tokens
from memory.transfer.held import HeldIn, conversations_holding
from memory.transfer.kept_chat import ids_stored_without_chat, replace_changed, venue_conversations
from memory.transfer.transcript import TranscriptLine
from memory.types import MessageRole
from models import Conversation, Message, Personality


@dataclass(frozen=True, slots=True)
class _Filed:
    """A message line already filed, as a later reply may name it: where it went."""

    personality_id: int
    external_id: str
    role: str
    conversation_id: int
    user_id: str
    guild_id: str | None
    channel_id: str | None

    def in_venue_of(self, reply: TranscriptLine) -> bool:
        """In the channel and guild the reply names (what it leaves out matches anything)."""
        return reply.guild_id in (None, self.guild_id) and reply.channel_id in (None, self.channel_id)


def personality_author_id(name: str) -> str:
    """Who a personality's imported replies are stored as said by: as the chat stores its own replies."""
    return f"personality:{name}"


@dataclass(frozen=True, slots=True)
class _Personality:
    id: int
    author_id: str  # what its replies are stored as said by


class Filing:
    """Where one import's lines go: their personality, their venue's conversation, and for a reply
    the user line it answers. Keeps per personality and venue what a later line may need (its
    conversation, its latest user line), never the lines: the user line a reply names is read back
    from the log when it is not in the batch."""

    def __init__(self, default_user_id: str | None, *, replace_edited: bool) -> None:
        self._session: AsyncSession  # the transaction of the batch being stored (store)
        self.touched: set[int] = set()  # the conversations the last batch stored messages in
        self._replace_edited = replace_edited
        self.forgotten: list[uuid.UUID] = []  # memories of replaced replies, to drop from the index
        self._default_user_id = default_user_id
        self._everything_into: _Personality | None = None
        self._named: dict[str, _Personality] = {}  # by the name lines give
        self._first_named: tuple[str, int] | None = None  # (personality, line) when importing all into one
        self._conversations: dict[tuple[int, str], int] = {}  # (personality, venue key) -> conversation
        # The latest user line in each venue a reply may name: (personality, guild, channel), None = any.
        self._latest: dict[tuple[int, str | None, str | None], _Filed] = {}
        self._last_user = default_user_id
        self._venues: set[tuple[int, str]] = set()  # (personality, venue key) the lines went to
        self._home: dict[tuple[int, str], int] = {}  # (personality, venue key) -> the chat's conversation
        # Lines without a timestamp are stored as said when the import started, in their order.
        self._started = datetime.now(UTC)

    def import_all_into(self, personality_id: int, name: str) -> None:
        self._everything_into = _Personality(personality_id, personality_author_id(name))

    @property
    def conversation_ids(self) -> list[int]:
        return sorted(set(self._conversations.values()))

    async def store(self, session: AsyncSession, batch: list[TranscriptLine]) -> int:
        """File and store a batch of lines in the session's transaction; how many messages were new."""
        self._session = session
        personalities = [await self._personality(line) for line in batch]
        if self._replace_edited:
            batch = await self._older_ids_kept(batch, personalities)
        stored = await self._stored_answers(batch, personalities)
        held = await conversations_holding(self._session, personalities, batch, self._conversations)
        # A chat imported whole stays in the conversation holding it, its new lines too (after an edit).
        self._home = {(p, venue): c for (p, _, venue), c in sorted(held.items(), key=lambda i: i[1])}
        here: dict[tuple[int, str], list[_Filed]] = {}  # this batch's lines so far, by id
        by_conversation: dict[int, list[tuple[int, LoggedMessage]]] = {}
        for line, personality in zip(batch, personalities, strict=True):
            answered: _Filed | None = None
            if line.role is MessageRole.USER:
                filed = await self._file_user_line(line, personality, held)
                author_id = filed.user_id
            else:
                named = (personality.id, line.reply_to or "")
                answered = self._answered(line, personality, [*stored.get(named, []), *here.get(named, [])])
                filed = await self._file_reply(line, personality, answered, held)
                author_id = personality.author_id
            here.setdefault((personality.id, line.id), []).append(filed)
            message = LoggedMessage(
                external_id=line.id,
                author_id=author_id,
                author_name=line.author,
                role=line.role,
                content=line.content,
                created_at=line.timestamp or self._started,
                token_count=count_tokens(line.content),
                reply_to=answered.external_id if answered is not None else None,
            )
            by_conversation.setdefault(filed.conversation_id, []).append((line.line_no, message))
        if self._replace_edited:
            conversations = await venue_conversations(self._session, self._venues)
            chat = [m for numbered in by_conversation.values() for _, m in numbered]
            self.forgotten += await replace_changed(self._session, conversations, chat)
        new = 0
        self.touched = set(by_conversation)
        for conversation_id, numbered in by_conversation.items():
            messages = [m for _, m in numbered]
            try:
                new += await store_messages(self._session, conversation_id, messages, exact=True)
            except MessageIdCollision as exc:
                raise InvalidInputError(
                    f"line {numbered[exc.index][0]}: id {exc.external_id!r} is already in the log for "
                    f"another message ({exc.reason}); give this file's messages ids of their own "
                    "(a prefix naming the file will do)"
                ) from None
        return new

    async def _file_user_line(self, line: TranscriptLine, personality: _Personality, held: HeldIn) -> _Filed:
        """Where a user line goes: the conversation holding it (memory.transfer.held), else its venue's;
        the latest."""
        user_id = line.user_id or self._default_user_id
        if user_id is None:
            raise InvalidInputError(f"line {line.line_no}: user message has no user_id; pass --user ID")
        self._last_user = user_id
        venue = Venue(guild_id=line.guild_id, channel_id=line.channel_id, user_id=user_id)
        conversation_id = await self._conversation_of(line, personality.id, venue, held)
        filed = _Filed(
            personality.id, line.id, line.role.value, conversation_id, user_id, line.guild_id, line.channel_id
        )
        for guild in (None, line.guild_id):
            for channel in (None, line.channel_id):
                self._latest[(personality.id, guild, channel)] = filed
        return filed

    async def _file_reply(
        self, line: TranscriptLine, personality: _Personality, answered: _Filed | None, held: HeldIn
    ) -> _Filed:
        """Where a reply goes: with the line it answers, else in the venue it names, of the last user."""
        if answered is not None:
            conversation_id, user_id = answered.conversation_id, answered.user_id
        else:
            user_id = self._last_user or ""
            if not user_id:
                raise InvalidInputError(
                    f"line {line.line_no}: reply before any user message and no --user to attribute it to"
                )
            venue = Venue(guild_id=line.guild_id, channel_id=line.channel_id, user_id=user_id)
            conversation_id = await self._conversation_of(line, personality.id, venue, held)  # a greeting
        return _Filed(personality.id, line.id, line.role.value, conversation_id, user_id, None, None)

    def _answered(
        self, reply: TranscriptLine, personality: _Personality, named: list[_Filed]
    ) -> _Filed | None:
        """The user line the reply answers: the latest of `named` (the lines and messages of its
        `reply_to` id, oldest first) in the venue the reply names; without reply_to, the latest user
        line in that venue; None when there is none."""
        if reply.reply_to is None:
            return self._latest.get((personality.id, reply.guild_id, reply.channel_id))
        users = [f for f in reversed(named) if f.role == MessageRole.USER.value]
        if not users:
            problem = "is not a user message" if named else "names no message on an earlier line"
            raise InvalidInputError(f"line {reply.line_no}: reply_to {reply.reply_to!r} {problem}")
        answered = next((f for f in users if f.in_venue_of(reply)), None)
        if answered is None:
            raise InvalidInputError(
                f"line {reply.line_no}: reply_to {reply.reply_to!r} is a message of another channel"
            )
        return answered

    async def _stored_answers(
        self, batch: list[TranscriptLine], personalities: list[_Personality]
    ) -> dict[tuple[int, str], list[_Filed]]:
        """The stored messages that replies of the batch name and no earlier line of the batch has:
        earlier batches' lines (or an earlier import's), by (personality, id), oldest first."""
        seen: set[tuple[int, str]] = set()
        wanted: set[tuple[int, str]] = set()
        for line, personality in zip(batch, personalities, strict=True):
            named = (personality.id, line.reply_to or "")
            if line.role is MessageRole.ASSISTANT and line.reply_to is not None and named not in seen:
                wanted.add(named)
            seen.add((personality.id, line.id))
        if not wanted:
            return {}
        rows = await self._session.execute(
            select(
                Conversation.personality_id,
                Message.external_id,
                Message.role,
                Conversation.id,
                Message.author_id,
                Conversation.guild_id,
                Conversation.channel_id,
            )
            .join(Conversation, Conversation.id == Message.conversation_id)
            .where(
                Conversation.personality_id.in_({p for p, _ in wanted}),
                Message.external_id.in_({i for _, i in wanted}),
            )
            .order_by(Message.id)
        )
        found: dict[tuple[int, str], list[_Filed]] = {}
        for row in rows:
            filed = _Filed(*row)
            if (filed.personality_id, filed.external_id) in wanted:
                found.setdefault((filed.personality_id, filed.external_id), []).append(filed)
        return found

    async def _personality(self, line: TranscriptLine) -> _Personality:
        """The personality the line goes to (see the module docstring)."""
        if self._everything_into is not None:
            if line.personality is not None:
                name = slugify(line.personality)
                if self._first_named is None:
                    self._first_named = (name, line.line_no)
                elif self._first_named[0] != name:
                    first, first_line = self._first_named
                    raise InvalidInputError(
                        f"line {line.line_no}: this file holds the messages of several personalities "
                        f"({first!r} on line {first_line}, {name!r} here): import it without "
                        "--personality, each line then goes to its own"
                    )
            return self._everything_into
        if line.personality is None:
            raise InvalidInputError(
                f"line {line.line_no}: the line names no personality: pass --personality NAME"
            )
        name = slugify(line.personality)
        if name not in self._named:
            found = await self._session.scalar(select(Personality.id).where(Personality.name == name))
            if found is None:
                raise InvalidInputError(
                    f"line {line.line_no}: no personality named {line.personality!r}; "
                    "`personae personality list` shows them"
                )
            self._named[name] = _Personality(found, personality_author_id(name))
        return self._named[name]

    async def _conversation_of(
        self, line: TranscriptLine, personality_id: int, venue: Venue, held: HeldIn
    ) -> int:
        """The conversation holding the line (memory.transfer.held), else, for a chat imported whole, the one
        holding the chat; else the venue's."""
        self._venues.add((personality_id, venue.key))
        found = held.get((personality_id, line.id, venue.key))
        if found is None and self._replace_edited:
            found = self._home.get((personality_id, venue.key))
        return found or await self._conversation(personality_id, venue)

    async def _older_ids_kept(
        self, batch: list[TranscriptLine], personalities: list[_Personality]
    ) -> list[TranscriptLine]:
        """The batch, its lines that the log holds under their older ids (kept_chat) known by those."""
        older: dict[str, str] = {}
        for personality_id in {p.id for p in personalities}:
            older |= await ids_stored_without_chat(self._session, personality_id, [line.id for line in batch])
        if not older:
            return batch
        return [line.model_copy(update={"id": older.get(line.id, line.id)}) for line in batch]

    async def _conversation(self, personality_id: int, venue: Venue) -> int:
        key = (personality_id, venue.key)
        if key not in self._conversations:
            self._conversations[key] = await ensure_conversation(self._session, personality_id, venue)
        return self._conversations[key]
