"""Import a JSONL transcript into the message log, then form its memories.

The file is read, checked and stored a batch of lines at a time, all in one transaction: a malformed
line anywhere leaves nothing behind, and the memory an import takes stays flat however long the file
(what later lines need of earlier ones is read back from the log). A message is known by its `id` in
its conversation, so importing the same file again stores nothing new and forms no new memory; an id
the log holds for another message (another author, other words, another message answered) is
refused with its line, never taken for it.

Each line goes to the personality it names (`personality`: an export of several personalities
imports back to each its own), else to the one the import is for; naming one for the whole import
files every line there, refused when the file names several. A reply (`"role": "assistant"`)
answers the user line its `reply_to` names, else the nearest user line before it in the same venue
(the channel and guild the reply names; any, when it names none), and is filed in that line's venue.
In a channel where several users talk at once, only `reply_to` says who was answered: without it,
each reply goes to whoever spoke last.

A chat that is the whole of a conversation as the user kept it (a SillyTavern chat, whose user may
have kept another swipe of a reply since the last import) is imported with `replace_edited`: a stored
reply to a user line whose replies in the file are others is replaced by them, and that exchange's
memory is formed anew.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import IO, Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError
from sqlalchemy import BigInteger, delete, func, literal, select, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import aliased

from memory.conversations import (
    LoggedMessage,
    MessageIdCollision,
    Venue,
    ensure_conversation,
    storable_text,
    store_messages,
)
from memory.errors import InvalidInputError, UserFacingError
from memory.formation.forming import CLAIM_LOCK_SPACE, FormationReport, MemoryFormation
from memory.formation.import_held import HeldIn, conversations_holding
from memory.formation.moments import storable_moment
from memory.llm import LLMUnavailableError
from memory.owners.personality_fields import slugify
from memory.recall.store import forget_rows
from memory.tokens import count_tokens
from memory.types import MemoryMode, MemoryState, MessageRole
from models import Conversation, Memory, Message, Personality

MAX_CONTENT_CHARS = 200_000
# Lines are stored as they are read, so the size does not bound memory: it bounds how long one
# import's transaction runs. Years of one user's chat fit well under it.
MAX_TRANSCRIPT_BYTES = 128 * 1024 * 1024
MAX_ID_CHARS = 64
REQUIRED_FIELDS = ("id", "role", "content")
# Lines read, checked and stored at a time.
BATCH_LINES = 2000
# New messages from which an import refreshes the log's statistics before forming (_analyze_log).
ANALYZE_AFTER = 5000
BYTE_ORDER_MARK = "\ufeff"
ProgressFactory = Callable[[int], Callable[[int], None]]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------- lines


_T = TypeVar("_T")


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of a JSONL text, numbered from 1, without their line ends.

    A JSONL line ends at "\\n" only ("\\r\\n" too): str.splitlines() also breaks at U+2028, U+2029,
    U+0085 and others, which stand raw inside JSON strings (what users said holds them). A byte order
    mark before the first line is read past.
    """
    pieces = text.removeprefix(BYTE_ORDER_MARK).split("\n")
    if pieces[-1] == "":
        pieces.pop()  # the end of the last line, not a line
    for line_no, piece in enumerate(pieces, start=1):
        yield line_no, piece.removesuffix("\r")


def transcript_file_lines(path: Path) -> Iterator[tuple[int, str]]:
    """A transcript file's lines as `jsonl_lines` gives them, read as they are used. A file over
    MAX_TRANSCRIPT_BYTES is refused unread; missing, unreadable or not UTF-8, in one line naming it."""
    return _decoded_lines(path, _open_transcript(path))


def read_transcript_text(path: Path) -> str:
    """A transcript file's text (of any format); a file over MAX_TRANSCRIPT_BYTES is refused unread."""
    with _open_transcript(path) as source:
        data = _read(path, source.read)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text (byte {exc.start})") from None


def _open_transcript(path: Path) -> IO[bytes]:
    def checked_open() -> IO[bytes]:
        size = path.stat().st_size
        if size > MAX_TRANSCRIPT_BYTES:
            raise InvalidInputError(
                f"{path} is too large ({size / 2**20:,.0f} MiB); transcripts are imported up to "
                f"{MAX_TRANSCRIPT_BYTES // 2**20} MiB at a time: split it into smaller files"
            )
        return path.open("rb")

    return _read(path, checked_open)


def _read(path: Path, read: Callable[[], _T]) -> _T:
    """`read()`, its OS errors said in one line naming the file."""
    try:
        return read()
    except FileNotFoundError:
        raise InvalidInputError(f"No such file: {path}") from None
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror}") from None


def _decoded_lines(path: Path, source: IO[bytes]) -> Iterator[tuple[int, str]]:
    with source:
        offset = 0
        lines = iter(source)  # a binary file's lines end at b"\n" only
        line_no = 0
        while (raw := _read(path, lambda: next(lines, None))) is not None:
            line_no += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInputError(f"{path} is not UTF-8 text (byte {offset + exc.start})") from None
            offset += len(raw)
            if line_no == 1:
                text = text.removeprefix(BYTE_ORDER_MARK)
            yield line_no, text.removesuffix("\n").removesuffix("\r")


def json_object(line_no: int, raw: str) -> dict[str, Any]:
    """One line's JSON object; InvalidInputError names what is wrong with it, in one line."""
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"line {line_no}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise InvalidInputError(f"line {line_no}: JSON nested too deeply for a transcript line") from None
    except ValueError:  # Python's own limit on the digits of an integer it converts
        limit = sys.get_int_max_str_digits()
        raise InvalidInputError(
            f"line {line_no}: not valid JSON (a number longer than {limit} digits)"
        ) from None
    if not isinstance(record, dict):
        raise InvalidInputError(f"line {line_no}: expected a JSON object")
    return record


# ---------------------------------------------------------------------------------------- fields


def _short_text(value: Any, info: ValidationInfo) -> str | None:
    """A string or an integer, at most MAX_ID_CHARS; empty means absent."""
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


def _external_id(value: Any, info: ValidationInfo) -> str | None:
    """A Discord-style id (see _short_text) that PostgreSQL can store as it is: an id is matched
    exactly, so it is refused rather than changed."""
    text = _short_text(value, info)
    if text is not None and storable_text(text) != text:
        raise PydanticCustomError(
            "external_id", "'{field}' holds a NUL or an unpaired surrogate", {"field": info.field_name}
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
    """ISO-8601, a trailing Z allowed; a time without a zone is UTC. Stored in UTC, so it must be
    a moment of years 1 to 9999 there."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise PydanticCustomError("timestamp", "'timestamp' is not ISO-8601") from None
    if (stored := storable_moment(moment)) is None:
        raise PydanticCustomError("timestamp", "'timestamp' is out of range (years 1 to 9999 in UTC)")
    return stored


def _message_id(value: Any, info: ValidationInfo) -> str:
    message_id = _external_id(value, info)
    if message_id is None:
        raise PydanticCustomError("external_id", "'id' is empty")
    return message_id


ExternalId = Annotated[str | None, BeforeValidator(_external_id)]
ShortText = Annotated[str | None, BeforeValidator(_short_text)]


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
    author: ShortText = None  # a name: made storable when stored, as the content is
    user_id: ExternalId = None
    channel_id: ExternalId = None
    guild_id: ExternalId = None
    # On a reply: the `id` of the user line it answers (ignored on a user line).
    reply_to: ExternalId = None
    # The personality the line was with (an export names it); None: the one the import is for.
    personality: ShortText = None


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


class Transcript:
    """A JSONL transcript's messages, each line checked as it is read (iterate once); `skipped` holds
    the blank and empty lines read so far, with why."""

    def __init__(self, lines: Iterable[tuple[int, str]]) -> None:
        self._lines = lines
        self.skipped: list[SkippedLine] = []

    def __iter__(self) -> Iterator[TranscriptLine]:
        for line_no, raw in self._lines:
            if not raw.strip():
                self.skipped.append(SkippedLine(line_no, "blank"))
                continue
            record = json_object(line_no, raw)
            if "persona" in record and "role" not in record:
                # A /memory export opens with the user's personas: who they are, not something said.
                continue
            try:
                line = TranscriptLine.model_validate({**record, "line_no": line_no})
            except ValidationError as exc:
                raise line_error(line_no, exc) from None
            if not line.content.strip():
                self.skipped.append(SkippedLine(line_no, "empty content"))
                continue
            yield line


def open_transcript(path: Path) -> Transcript:
    """A transcript file's messages, read and checked as they are imported (see Transcript)."""
    return Transcript(transcript_file_lines(path))


def parse_transcript(text: str) -> tuple[list[TranscriptLine], int]:
    """Check every line of a transcript's text; the messages and how many lines were skipped."""
    lines, skipped = parse_transcript_lines(text)
    return lines, len(skipped)


def parse_transcript_lines(text: str) -> tuple[list[TranscriptLine], list[SkippedLine]]:
    """Check every line of a transcript's text; the messages and the lines skipped, with why."""
    transcript = Transcript(jsonl_lines(text))
    return list(transcript), transcript.skipped


def read_transcript(path: Path) -> tuple[list[TranscriptLine], int]:
    """Read and check a whole transcript file (see parse_transcript); refused unread when too large."""
    transcript = open_transcript(path)
    return list(transcript), len(transcript.skipped)


# ---------------------------------------------------------------------------------------- import


class ImportIncompleteError(UserFacingError):
    """The messages were stored, but forming their memories failed: they wait in the log."""


class TranscriptImporter:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], memory: MemoryFormation) -> None:
        self._sessionmaker = sessionmaker
        self._memory = memory

    async def import_lines(
        self,
        lines: Iterable[TranscriptLine],
        *,
        personality_id: int | None = None,
        personality_user_id: str | None = None,
        default_user_id: str | None,
        skipped_lines: int = 0,
        mode: MemoryMode | None = None,
        progress: ProgressFactory | None = None,
        replace_edited: bool = False,
    ) -> ImportReport:
        """Store the lines as messages (atomically, a batch at a time), then form their exchanges'
        memories. `personality_id` (its messages' author `personality_user_id`) takes every line;
        without it, each line goes to the personality it names.

        replace_edited: the lines are the whole conversation as its user kept it (see the module
        docstring), so a stored reply they no longer hold is replaced by the one they do; they are
        stored as one batch, every reply to a line beside it."""
        read = new = 0
        async with self._sessionmaker.begin() as session:
            filing = _Filing(session, default_user_id, replace_edited=replace_edited)
            if personality_id is not None:
                if personality_user_id is None:
                    name = await session.scalar(
                        select(Personality.name).where(Personality.id == personality_id)
                    )
                    personality_user_id = f"personality:{name}"
                filing.import_all_into(personality_id, personality_user_id)
            batches = iter(lines)
            while batch := list(islice(batches, None if replace_edited else BATCH_LINES)):
                read += len(batch)
                new += await filing.store(batch)
            conversation_ids = filing.conversation_ids
            expected = await _exchanges_to_form(session, conversation_ids) if new else 0
        await self._memory.store.drop_points(filing.forgotten)
        if new >= ANALYZE_AFTER:
            await self._analyze_log()
        if isinstance(lines, Transcript):  # its skipped lines are known once it is read
            skipped_lines += len(lines.skipped)
        report = FormationReport()
        step = progress(expected) if progress is not None and new else None
        try:
            for conversation_id in conversation_ids:
                report.add(
                    await self._memory.form_pending(
                        conversation_id=conversation_id, mode_override=mode, progress=step
                    )
                )
        except LLMUnavailableError as exc:
            raise ImportIncompleteError(
                f"{new} new messages stored, but forming their memories failed: {exc}. They wait in the "
                "log: run the same import again (or `personae worker`) once the model answers."
            ) from exc
        return ImportReport(
            messages_read=read,
            messages_new=new,
            skipped_lines=skipped_lines,
            exchanges=report.exchanges,
            formation=report,
        )

    async def _analyze_log(self) -> None:
        """Refresh the planner's statistics of the log, so that formation's queries use its indexes.

        Until autovacuum comes round (a minute or more), PostgreSQL plans for the log as it was before
        the import: for a log that was small, it scans the whole table for every exchange's context.
        """
        try:
            async with self._sessionmaker.begin() as session:
                await session.execute(text("ANALYZE messages"))
        except DBAPIError:  # not the table's owner, say: autovacuum will, later
            log.warning(
                "Could not ANALYZE messages after an import; formation may start slowly", exc_info=True
            )


async def _exchanges_to_form(session: AsyncSession, conversation_ids: list[int]) -> int:
    """The messages answered and not yet remembered in these conversations: each is an exchange."""
    return int(
        await session.scalar(
            select(func.count(func.distinct(Message.reply_to_id))).where(
                Message.conversation_id.in_(conversation_ids),
                Message.role == MessageRole.ASSISTANT.value,
                Message.memory_processed_at.is_(None),
            )
        )
        or 0
    )


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


@dataclass(frozen=True, slots=True)
class _Personality:
    id: int
    author_id: str  # what its replies are stored as said by


class _Filing:
    """Where one import's lines go: their personality, their venue's conversation, and for a reply
    the user line it answers. Keeps per personality and venue what a later line may need (its
    conversation, its latest user line), never the lines: the user line a reply names is read back
    from the log when it is not in the batch."""

    def __init__(self, session: AsyncSession, default_user_id: str | None, *, replace_edited: bool) -> None:
        self._session = session
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
        # Lines without a timestamp are stored as said when the import started, in their order.
        self._started = datetime.now(UTC)

    def import_all_into(self, personality_id: int, author_id: str) -> None:
        self._everything_into = _Personality(personality_id, author_id)

    @property
    def conversation_ids(self) -> list[int]:
        return sorted(set(self._conversations.values()))

    async def store(self, batch: list[TranscriptLine]) -> int:
        """File and store a batch of lines; how many messages were new."""
        personalities = [await self._personality(line) for line in batch]
        stored = await self._stored_answers(batch, personalities)
        held = await conversations_holding(self._session, personalities, batch, self._conversations)
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
        new = 0
        for conversation_id, numbered in by_conversation.items():
            messages = [m for _, m in numbered]
            if self._replace_edited:
                self.forgotten += await _replace_edited_replies(self._session, conversation_id, messages)
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
        """Where a user line goes: the conversation holding it (import_held), else its venue's; the latest."""
        user_id = line.user_id or self._default_user_id
        if user_id is None:
            raise InvalidInputError(f"line {line.line_no}: user message has no user_id; pass --user ID")
        self._last_user = user_id
        venue = Venue(guild_id=line.guild_id, channel_id=line.channel_id, user_id=user_id)
        where = (personality.id, line.id, venue.key)
        conversation_id = held.get(where) or await self._conversation(personality.id, venue)
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
            where = (personality.id, line.id, venue.key)  # a greeting, held where it was imported
            conversation_id = held.get(where) or await self._conversation(personality.id, venue)
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
            self._named[name] = _Personality(found, f"personality:{name}")
        return self._named[name]

    async def _conversation(self, personality_id: int, venue: Venue) -> int:
        key = (personality_id, venue.key)
        if key not in self._conversations:
            self._conversations[key] = await ensure_conversation(self._session, personality_id, venue)
        return self._conversations[key]


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
