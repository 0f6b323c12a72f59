"""Import a JSONL transcript into the message log, then form its memories.

All lines are checked before anything is written, and the messages are stored in one transaction:
a malformed file leaves nothing behind. Messages are keyed by their `id`, so importing the same file
again stores nothing new and forms no new memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.conversations import NewMessage, Venue, ensure_conversation, store_messages
from memory.errors import InvalidInputError
from memory.formation.cleaning import approx_tokens
from memory.formation.exchanges import LoggedMessage, group_exchanges
from memory.service import FormationReport, MemoryService
from memory.types import MemoryMode, MessageRole

MAX_CONTENT_CHARS = 200_000
MAX_ID_CHARS = 64
ProgressFactory = Callable[[int], Callable[[int], None]]


@dataclass(frozen=True, slots=True)
class TranscriptLine:
    line_no: int
    id: str
    role: MessageRole
    content: str
    timestamp: datetime | None
    author: str | None
    user_id: str | None
    channel_id: str | None
    guild_id: str | None


@dataclass
class ImportReport:
    messages_read: int
    messages_new: int
    skipped_lines: int
    exchanges: int
    formation: FormationReport


def _optional_str(value: Any, name: str, line_no: int) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidInputError(f"line {line_no}: {name!r} must be a string")
    text = str(value)
    if len(text) > MAX_ID_CHARS:
        raise InvalidInputError(f"line {line_no}: {name!r} is longer than {MAX_ID_CHARS} characters")
    return text


def parse_transcript(text: str) -> tuple[list[TranscriptLine], int]:
    """Validate every line; return the messages and how many lines were skipped (blank or empty)."""
    lines: list[TranscriptLine] = []
    skipped = 0
    seen: set[str] = set()
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            skipped += 1
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"line {line_no}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InvalidInputError(f"line {line_no}: expected a JSON object")
        missing = [key for key in ("id", "role", "content") if key not in record]
        if missing:
            raise InvalidInputError(f"line {line_no}: missing required field(s) {', '.join(missing)}")
        message_id = _optional_str(record["id"], "id", line_no)
        if message_id is None:
            raise InvalidInputError(f"line {line_no}: 'id' is empty")
        if record["role"] not in ("user", "assistant"):
            raise InvalidInputError(f'line {line_no}: \'role\' must be "user" or "assistant"')
        content = record["content"]
        if not isinstance(content, str):
            raise InvalidInputError(f"line {line_no}: 'content' must be a string")
        if len(content) > MAX_CONTENT_CHARS:
            raise InvalidInputError(f"line {line_no}: 'content' is over {MAX_CONTENT_CHARS} characters")
        if message_id in seen:
            raise InvalidInputError(f"line {line_no}: id {message_id!r} appears twice in the file")
        seen.add(message_id)
        if not content.strip():
            skipped += 1
            continue
        timestamp = None
        if record.get("timestamp"):
            try:
                timestamp = datetime.fromisoformat(str(record["timestamp"]).replace("Z", "+00:00"))
            except ValueError:
                raise InvalidInputError(f"line {line_no}: 'timestamp' is not ISO-8601") from None
            if timestamp.tzinfo is None:
                timestamp = timestamp.replace(tzinfo=UTC)
        lines.append(
            TranscriptLine(
                line_no=line_no,
                id=message_id,
                role=MessageRole(record["role"]),
                content=content,
                timestamp=timestamp,
                author=_optional_str(record.get("author"), "author", line_no),
                user_id=_optional_str(record.get("user_id"), "user_id", line_no),
                channel_id=_optional_str(record.get("channel_id"), "channel_id", line_no),
                guild_id=_optional_str(record.get("guild_id"), "guild_id", line_no),
            )
        )
    return lines, skipped


def read_transcript(path: Path) -> tuple[list[TranscriptLine], int]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInputError(f"No such file: {path}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    return parse_transcript(text)


class TranscriptImporter:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], memory: MemoryService) -> None:
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
    ) -> ImportReport:
        """Store the lines as messages (atomically), then form memories for their exchanges."""
        venues: dict[str, tuple[Venue, list[NewMessage]]] = {}
        last_user: str | None = default_user_id
        base = datetime.now(UTC)
        for line in lines:
            if line.role is MessageRole.USER:
                user_id = line.user_id or default_user_id
                if user_id is None:
                    raise InvalidInputError(
                        f"line {line.line_no}: user message has no user_id; pass --user ID"
                    )
                last_user = user_id
            else:
                user_id = last_user or default_user_id
                if user_id is None:
                    raise InvalidInputError(
                        f"line {line.line_no}: reply before any user message and no --user to attribute it to"
                    )
            venue = Venue(guild_id=line.guild_id, channel_id=line.channel_id, user_id=user_id)
            author_id = user_id if line.role is MessageRole.USER else personality_user_id
            venues.setdefault(venue.key, (venue, []))[1].append(
                NewMessage(
                    external_id=line.id,
                    author_id=author_id,
                    author_name=line.author,
                    role=line.role,
                    content=line.content,
                    created_at=line.timestamp or base,
                    token_count=approx_tokens(line.content),
                )
            )
        expected = sum(
            len(group_exchanges([_as_logged(i, m) for i, m in enumerate(messages)]).exchanges)
            for _, messages in venues.values()
        )
        conversation_ids = []
        new = 0
        async with self._sessionmaker.begin() as session:
            for venue, messages in venues.values():
                conversation_id = await ensure_conversation(session, personality_id, venue)
                conversation_ids.append(conversation_id)
                new += await store_messages(session, conversation_id, messages)
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


def _as_logged(index: int, message: NewMessage) -> LoggedMessage:
    return LoggedMessage(
        id=index,
        external_id=message.external_id,
        author_id=message.author_id,
        author_name=message.author_name,
        role=message.role,
        content=message.content,
        created_at=message.created_at,
    )
