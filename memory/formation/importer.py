"""Import a JSONL transcript into the message log, then form its memories.

All lines are checked before anything is written, and the messages are stored in one transaction:
a malformed file leaves nothing behind. Messages are keyed by their `id`, so importing the same file
again stores nothing new and forms no new memory.

A reply (`"role": "assistant"`) answers the user line its `reply_to` names, else the nearest user line
before it in the same venue (the channel and guild the reply names; any, when it names none), and is
filed in that line's venue. In a channel where several users talk at once, only `reply_to` says who
was answered: without it, each reply goes to whoever spoke last.

A chat that is the whole of a conversation as the user kept it (a SillyTavern chat, whose user may
have kept another swipe of a reply since the last import) is imported with `replace_edited`: a stored
reply to a user line whose replies in the file are others is replaced by them, and that exchange's
memory is formed anew.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError
from sqlalchemy import BigInteger, delete, func, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import aliased

from memory.conversations import LoggedMessage, Venue, ensure_conversation, store_messages
from memory.errors import InvalidInputError
from memory.formation.exchanges import group_exchanges
from memory.formation.forming import CLAIM_LOCK_SPACE, FormationReport, MemoryFormation
from memory.recall.store import forget_rows
from memory.tokens import count_tokens
from memory.types import MemoryMode, MemoryState, MessageRole
from models import Memory, Message

MAX_CONTENT_CHARS = 200_000
# A transcript is read and validated whole before anything is stored (an import is all or nothing),
# so its size bounds the memory an import takes: years of one user's chat fit well under this.
MAX_TRANSCRIPT_BYTES = 128 * 1024 * 1024
MAX_ID_CHARS = 64
REQUIRED_FIELDS = ("id", "role", "content")
ProgressFactory = Callable[[int], Callable[[int], None]]


def _external_id(value: Any, info: ValidationInfo) -> str | None:
    """A Discord-style id: a string or an integer, at most MAX_ID_CHARS; empty means absent."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise PydanticCustomError("external_id", "'{field}' must be a string", {"field": info.field_name})
    text = str(value)
    if len(text) > MAX_ID_CHARS:
        raise PydanticCustomError(
            "external_id",
            "'{field}' is longer than {limit} characters",
            {"field": info.field_name, "limit": MAX_ID_CHARS},
        )
    return text


def _role(value: Any) -> MessageRole:
    if value not in ("user", "assistant"):
        raise PydanticCustomError("role", '\'role\' must be "user" or "assistant"')
    return MessageRole(value)


def _content(value: Any) -> str:
    if not isinstance(value, str):
        raise PydanticCustomError("content", "'content' must be a string")
    if len(value) > MAX_CONTENT_CHARS:
        raise PydanticCustomError(
            "content", "'content' is over {limit} characters", {"limit": MAX_CONTENT_CHARS}
        )
    return value


def _timestamp(value: Any) -> datetime | None:
    """ISO-8601, a trailing Z allowed; a time without a zone is UTC."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise PydanticCustomError("timestamp", "'timestamp' is not ISO-8601") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _message_id(value: Any, info: ValidationInfo) -> str:
    message_id = _external_id(value, info)
    if message_id is None:
        raise PydanticCustomError("external_id", "'id' is empty")
    return message_id


ExternalId = Annotated[str | None, BeforeValidator(_external_id)]


class TranscriptLine(BaseModel):
    """One message of a JSONL transcript, as `personae import` reads it and `/memory export` writes it.

    Keys other than these (an export's `memory` record, say) are ignored.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    line_no: int
    id: Annotated[str, BeforeValidator(_message_id)]
    role: Annotated[MessageRole, BeforeValidator(_role)]
    content: Annotated[str, BeforeValidator(_content)]
    timestamp: Annotated[datetime | None, BeforeValidator(_timestamp)] = None
    author: ExternalId = None
    user_id: ExternalId = None
    channel_id: ExternalId = None
    guild_id: ExternalId = None
    # On a reply: the `id` of the user line it answers (ignored on a user line).
    reply_to: ExternalId = None


@dataclass(frozen=True, slots=True)
class SkippedLine:
    """A line of a transcript that holds nothing to remember, and why."""

    line_no: int
    reason: str


@dataclass
class ImportReport:
    messages_read: int
    messages_new: int
    skipped_lines: int
    exchanges: int
    formation: FormationReport


def line_error(line_no: int, error: ValidationError) -> InvalidInputError:
    """The first problem of a line, in one line naming it: what the user fixes first."""
    problems = error.errors()
    missing = [str(p["loc"][0]) for p in problems if p["type"] == "missing"]
    if missing:
        ordered = [field for field in REQUIRED_FIELDS if field in missing]
        return InvalidInputError(f"line {line_no}: missing required field(s) {', '.join(ordered)}")
    return InvalidInputError(f"line {line_no}: {problems[0]['msg']}")


def parse_transcript(text: str) -> tuple[list[TranscriptLine], int]:
    """Validate every line; return the messages and how many lines were skipped (blank or empty)."""
    lines, skipped = parse_transcript_lines(text)
    return lines, len(skipped)


def parse_transcript_lines(text: str) -> tuple[list[TranscriptLine], list[SkippedLine]]:
    """Validate every line; return the messages and the lines skipped, with why."""
    lines: list[TranscriptLine] = []
    skipped: list[SkippedLine] = []
    seen: set[str] = set()
    roles: dict[str, MessageRole] = {}  # the stored lines so far, by id
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            skipped.append(SkippedLine(line_no, "blank"))
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"line {line_no}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InvalidInputError(f"line {line_no}: expected a JSON object")
        if "persona" in record and "role" not in record:
            # A /memory export opens with the user's personas: who they are, not something said.
            continue
        try:
            line = TranscriptLine.model_validate({**record, "line_no": line_no})
        except ValidationError as exc:
            raise line_error(line_no, exc) from None
        if line.id in seen:
            raise InvalidInputError(f"line {line_no}: id {line.id!r} appears twice in the file")
        seen.add(line.id)
        if not line.content.strip():
            skipped.append(SkippedLine(line_no, "empty content"))
            continue
        if line.role is MessageRole.ASSISTANT and line.reply_to is not None:
            answered = roles.get(line.reply_to)
            if answered is None:
                raise InvalidInputError(
                    f"line {line_no}: reply_to {line.reply_to!r} names no message on an earlier line"
                )
            if answered is not MessageRole.USER:
                raise InvalidInputError(f"line {line_no}: reply_to {line.reply_to!r} is not a user message")
        roles[line.id] = line.role
        lines.append(line)
    return lines, skipped


def read_transcript(path: Path) -> tuple[list[TranscriptLine], int]:
    """Read and validate a transcript file; a file over MAX_TRANSCRIPT_BYTES is refused unread."""
    return parse_transcript(read_transcript_text(path))


def read_transcript_text(path: Path) -> str:
    """A transcript file's text (of any format); a file over MAX_TRANSCRIPT_BYTES is refused unread."""
    try:
        size = path.stat().st_size
        if size > MAX_TRANSCRIPT_BYTES:
            raise InvalidInputError(
                f"{path} is too large ({size / 2**20:,.0f} MiB); transcripts are imported up to "
                f"{MAX_TRANSCRIPT_BYTES // 2**20} MiB at a time: split it into smaller files"
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInputError(f"No such file: {path}") from None
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    return text


class TranscriptImporter:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], memory: MemoryFormation) -> None:
        self._sessionmaker = sessionmaker
        self._memory = memory

    async def import_lines(
        self,
        lines: list[TranscriptLine],
        *,
        personality_id: int,
        personality_user_id: str,
        default_user_id: str | None,
        skipped_lines: int = 0,
        mode: MemoryMode | None = None,
        progress: ProgressFactory | None = None,
        replace_edited: bool = False,
    ) -> ImportReport:
        """Store the lines as messages (atomically), then form memories for their exchanges.

        replace_edited: the lines are the whole conversation as its user kept it (see the module
        docstring), so a stored reply they no longer hold is replaced by the one they do."""
        venues: dict[str, tuple[Venue, list[LoggedMessage]]] = {}
        venue_of: dict[str, Venue] = {}  # user line id -> its venue
        latest = _LatestUserLines()
        last_user: str | None = default_user_id
        base = datetime.now(UTC)
        for line in lines:
            answered: TranscriptLine | None = None
            if line.role is MessageRole.USER:
                user_id = line.user_id or default_user_id
                if user_id is None:
                    raise InvalidInputError(
                        f"line {line.line_no}: user message has no user_id; pass --user ID"
                    )
                last_user = user_id
                venue = Venue(guild_id=line.guild_id, channel_id=line.channel_id, user_id=user_id)
                venue_of[line.id] = venue
                latest.add(line)
            else:
                answered = latest.answered_by(line)
                if answered is not None:
                    venue = venue_of[answered.id]  # a reply is filed with the message it answers
                else:
                    user_id = last_user or default_user_id
                    if user_id is None:
                        raise InvalidInputError(
                            f"line {line.line_no}: reply before any user message and no --user to "
                            "attribute it to"
                        )
                    venue = Venue(guild_id=line.guild_id, channel_id=line.channel_id, user_id=user_id)
            author_id = venue.user_id if line.role is MessageRole.USER else personality_user_id
            venues.setdefault(venue.key, (venue, []))[1].append(
                LoggedMessage(
                    external_id=line.id,
                    author_id=author_id,
                    author_name=line.author,
                    role=line.role,
                    content=line.content,
                    created_at=line.timestamp or base,
                    token_count=count_tokens(line.content),
                    reply_to=answered.id if answered is not None else None,
                )
            )
        expected = sum(len(group_exchanges(messages).exchanges) for _, messages in venues.values())
        conversation_ids = []
        new = 0
        forgotten: list[uuid.UUID] = []
        async with self._sessionmaker.begin() as session:
            for venue, messages in venues.values():
                conversation_id = await ensure_conversation(session, personality_id, venue)
                conversation_ids.append(conversation_id)
                if replace_edited:
                    forgotten += await _replace_edited_replies(session, conversation_id, messages)
                new += await store_messages(session, conversation_id, messages)
        await self._memory.store.drop_points(forgotten)
        report = FormationReport()
        step = progress(expected) if progress is not None and new else None
        for conversation_id in conversation_ids:
            report.add(
                await self._memory.form_pending(
                    conversation_id=conversation_id, mode_override=mode, progress=step
                )
            )
        return ImportReport(
            messages_read=len(lines),
            messages_new=new,
            skipped_lines=skipped_lines,
            exchanges=report.exchanges,
            formation=report,
        )


async def _replace_edited_replies(
    session: AsyncSession, conversation_id: int, messages: list[LoggedMessage]
) -> list[uuid.UUID]:
    """Delete the stored replies to the chat's user lines that the chat no longer holds (another swipe
    was kept), forget their exchanges' memories and make those exchanges pending again, under the
    conversation's formation claim; the ids of the memories forgotten, for the index."""
    kept: dict[str, set[str]] = {}  # a user line's id -> the ids of the chat's replies to it
    for message in messages:
        if message.role is MessageRole.ASSISTANT and message.reply_to is not None:
            kept.setdefault(message.reply_to, set()).add(message.external_id)
    if not kept:
        return []
    answered = aliased(Message)
    stored = await session.execute(
        select(Message.id, Message.external_id, answered.external_id)
        .join(answered, Message.reply_to_id == answered.id)
        .where(Message.conversation_id == conversation_id, answered.external_id.in_(sorted(kept)))
    )
    replaced = [(row_id, reply, user) for row_id, reply, user in stored if reply not in kept[user]]
    if not replaced:
        return []
    # Wait for a pass forming these exchanges, and keep any other out until this is committed.
    await session.execute(
        select(func.pg_advisory_xact_lock(literal(CLAIM_LOCK_SPACE + conversation_id, BigInteger)))
    )
    gone = sorted(reply for _, reply, _ in replaced)
    involved = sorted({user for _, _, user in replaced} | set(gone))
    of_exchanges = (Memory.conversation_id == conversation_id, Memory.source_message_ids.overlap(involved))
    sources = (
        await session.scalars(
            select(func.unnest(Memory.source_message_ids)).where(
                *of_exchanges, Memory.state != MemoryState.DELETED.value
            )
        )
    ).all()
    forgotten = await forget_rows(session, *of_exchanges, tombstone=False)
    await session.execute(delete(Message).where(Message.id.in_([row_id for row_id, _, _ in replaced])))
    pending = sorted((set(sources) | set(involved)) - set(gone))
    await session.execute(
        update(Message)
        .where(
            Message.conversation_id == conversation_id,
            Message.external_id.in_(pending),
            Message.memory_excluded.is_(None),
        )
        .values(memory_processed_at=None)
    )
    return forgotten


class _LatestUserLines:
    """The user lines read so far, to find the one a reply answers."""

    def __init__(self) -> None:
        self._by_id: dict[str, TranscriptLine] = {}
        # The latest user line in each venue a reply may name: (guild_id, channel_id), None = any.
        self._latest: dict[tuple[str | None, str | None], TranscriptLine] = {}

    def add(self, line: TranscriptLine) -> None:
        self._by_id[line.id] = line
        for guild in (None, line.guild_id):
            for channel in (None, line.channel_id):
                self._latest[(guild, channel)] = line

    def answered_by(self, reply: TranscriptLine) -> TranscriptLine | None:
        """The line `reply_to` names (parse_transcript checked it is an earlier user line), else the
        latest one in the venue the reply names; None when there is none."""
        if reply.reply_to is None:
            return self._latest.get((reply.guild_id, reply.channel_id))
        answered = self._by_id[reply.reply_to]
        if reply.guild_id not in (None, answered.guild_id) or reply.channel_id not in (
            None,
            answered.channel_id,
        ):
            raise InvalidInputError(
                f"line {reply.line_no}: reply_to {reply.reply_to!r} is a message of another channel"
            )
        return answered
