"""Read a SillyTavern chat (JSONL) as the transcript lines `personae import` forms memories from.

SillyTavern writes the chat's metadata on the first line (`user_name`, `character_name`,
`create_date`, `chat_metadata`), then one message a line: `name`, `is_user`, `mes`, `send_date`,
and things that are no part of what was said (`swipes`, `swipe_id`, `extra`, ...), which are ignored:
`mes` is the answer the user kept. System and narrator lines (`is_system`, hidden messages, `/sys`)
are skipped. `send_date` comes in several forms over SillyTavern's versions: ISO-8601, "November 22,
2026 4:51pm", "2026-11-22 @16h 51m 03s 120ms" and epoch milliseconds; a time without a zone is UTC,
and a date in none of these forms takes the time of the message before it, keeping the order.

The chat names no user id (the importer takes `--user`), and its messages no id: each gets one made
from the chat (its creation date and character) and the message itself (speaker, date, words), so
importing the same chat again, or a longer copy of it after more was said, stores only what is new,
and a line edited or deleted since is known as the chat's and replaced (memory.transfer.kept_chat).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from memory.errors import InvalidInputError
from memory.transfer.kept_chat import chat_line_id
from memory.transfer.moments import storable_moment
from memory.transfer.transcript import (
    MAX_CONTENT_CHARS,
    MAX_ID_CHARS,
    SkippedLine,
    TranscriptLine,
    json_object,
    jsonl_lines,
    line_error,
)
from memory.types import MessageRole

_EPOCH = re.compile(r"\d{9,14}(\.\d+)?")
_HUMANIZED = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2}) ?@(\d{1,2})h ?(\d{1,2})m ?(\d{1,2})s(?: ?(\d{1,3})ms)?", re.IGNORECASE
)
_FORMATS = ("%B %d, %Y %I:%M%p", "%b %d, %Y %I:%M%p", "%B %d, %Y %I:%M %p", "%B %d, %Y %H:%M")
_METADATA_KEYS = ("user_name", "character_name", "create_date", "chat_metadata")


@dataclass(frozen=True)
class SillyTavernChat:
    lines: list[TranscriptLine]
    skipped_lines: list[SkippedLine]  # blank, empty, system and narrator lines, with why
    character_name: str | None
    user_name: str | None

    @property
    def skipped(self) -> int:
        return len(self.skipped_lines)


def _from_epoch(value: float) -> datetime | None:
    seconds = value / 1000 if value > 1e11 else value  # milliseconds, as JavaScript's Date.now()
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def parse_send_date(value: Any) -> datetime | None:
    """A `send_date` or `create_date` as SillyTavern writes them; None when it is none of its forms."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return _from_epoch(float(value))
    if not isinstance(value, str):
        return None
    text = value.strip()
    if _EPOCH.fullmatch(text):
        return _from_epoch(float(text))
    moment: datetime | None = None
    humanized = _HUMANIZED.fullmatch(text)
    try:
        if humanized:
            year, month, day, hour, minute, second, ms = (int(g or 0) for g in humanized.groups())
            moment = datetime(year, month, day, hour, minute, second, ms * 1000)  # noqa: DTZ001 (UTC below)
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        for layout in _FORMATS:
            try:
                moment = datetime.strptime(text, layout)  # noqa: DTZ007 (UTC below)
                break
            except ValueError:
                continue
    if moment is None:
        return None
    return storable_moment(moment)


def _name(value: Any) -> str | None:
    """A speaker's name as a transcript's `author` holds it (at most MAX_ID_CHARS)."""
    return (value.strip()[:MAX_ID_CHARS] or None) if isinstance(value, str) else None


def _is_narration(record: dict[str, Any]) -> bool:
    extra = record.get("extra")
    return bool(record.get("is_system")) or (isinstance(extra, dict) and extra.get("type") == "narrator")


def _skip_reason(record: dict[str, Any]) -> str:
    if record.get("is_system"):
        return "a system or hidden message"
    if _is_narration(record):
        return "a narrator's line"
    return "an empty message"


def _chat_key(metadata: dict[str, Any]) -> str | None:
    """What names the chat in its lines' ids: made from its creation date and character, which
    SillyTavern keeps however its messages are edited (a branch is a chat of its own, created anew).
    None without a creation date: chats without metadata would all share one."""
    if not metadata.get("create_date"):
        return None
    key = json.dumps([metadata.get("create_date"), metadata.get("character_name")], default=str)
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def parse_sillytavern(text: str) -> SillyTavernChat:
    """Validate every line of a SillyTavern chat; InvalidInputError names the first bad one."""
    lines: list[TranscriptLine] = []
    skipped: list[SkippedLine] = []
    metadata: dict[str, Any] = {}
    seen: Counter[str] = Counter()
    previous: datetime | None = None
    chat_key: str | None = None
    first = True
    for line_no, raw in jsonl_lines(text):  # not splitlines(): JSON.stringify leaves U+2028 raw
        if not raw.strip():
            skipped.append(SkippedLine(line_no, "blank"))
            continue
        record = json_object(line_no, raw)
        if first:
            first = False
            if "mes" not in record:
                if not any(key in record for key in _METADATA_KEYS):
                    raise InvalidInputError(
                        f"line {line_no}: not a SillyTavern chat (its first line is neither the chat's "
                        "metadata nor a message)"
                    )
                metadata = record
                previous = parse_send_date(metadata.get("create_date"))
                chat_key = _chat_key(metadata)
                continue
        if "mes" not in record:
            raise InvalidInputError(f"line {line_no}: missing required field 'mes'")
        mes, is_user = record["mes"], record.get("is_user")
        if not isinstance(mes, str):
            raise InvalidInputError(f"line {line_no}: 'mes' must be a string")
        if len(mes) > MAX_CONTENT_CHARS:
            raise InvalidInputError(f"line {line_no}: 'mes' is over {MAX_CONTENT_CHARS} characters")
        if not isinstance(is_user, bool):
            raise InvalidInputError(f"line {line_no}: 'is_user' must be true or false")
        if _is_narration(record) or not mes.strip():
            skipped.append(SkippedLine(line_no, _skip_reason(record)))
            continue
        sent = parse_send_date(record.get("send_date")) or previous
        previous = sent
        key = json.dumps(
            [
                metadata.get("create_date"),
                metadata.get("character_name"),
                is_user,
                record.get("send_date"),
                mes,
            ],
            default=str,
        )
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40]
        seen[digest] += 1
        message_id = chat_line_id(chat_key, digest + (f"-{seen[digest]}" if seen[digest] > 1 else ""))
        try:
            line = TranscriptLine.model_validate(
                {
                    "line_no": line_no,
                    "id": message_id,
                    "role": (MessageRole.USER if is_user else MessageRole.ASSISTANT).value,
                    "content": mes,
                    "timestamp": sent.isoformat() if sent is not None else None,
                    "author": _name(record.get("name")),
                }
            )
        except ValidationError as exc:
            raise line_error(line_no, exc) from None
        lines.append(line)
    return SillyTavernChat(
        lines=lines,
        skipped_lines=skipped,
        character_name=_name(metadata.get("character_name")),
        user_name=_name(metadata.get("user_name")),
    )
