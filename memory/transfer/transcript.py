"""A JSONL transcript read and checked, a line at a time: what `personae import` takes in.

A line is a JSON object with an `id`, a `role` and a `content` (and optionally a timestamp, an author,
the user, channel and guild ids, the line a reply answers and the personality it was with); a line
that breaks a rule is refused with its number, in one line saying what to fix.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError

from memory.conversations import storable_text
from memory.errors import InvalidInputError
from memory.transfer.moments import storable_moment
from memory.types import MessageRole

MAX_CONTENT_CHARS = 200_000
# Lines are stored as they are read, a chunk committed at a time, so the size does not bound memory:
# it bounds how long one import runs. Years of one user's chat fit well under it.
MAX_TRANSCRIPT_BYTES = 128 * 1024 * 1024
MAX_ID_CHARS = 64
REQUIRED_FIELDS = ("id", "role", "content")
BYTE_ORDER_MARK = "\ufeff"


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
    MAX_TRANSCRIPT_BYTES is refused at once, unread; missing, unreadable or not UTF-8, in one line
    naming it. The file is opened when the first line is read: lines never read leave no file open."""
    _read(path, lambda: _check_size(path))
    return _decoded_lines(path)


def read_transcript_text(path: Path) -> str:
    """A transcript file's text (of any format); a file over MAX_TRANSCRIPT_BYTES is refused unread."""
    with _open_transcript(path) as source:
        data = _read(path, source.read)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text (byte {exc.start})") from None


def _check_size(path: Path) -> None:
    size = path.stat().st_size
    if size > MAX_TRANSCRIPT_BYTES:
        raise InvalidInputError(
            f"{path} is too large ({size / 2**20:,.0f} MiB); transcripts are imported up to "
            f"{MAX_TRANSCRIPT_BYTES // 2**20} MiB at a time: split it into smaller files"
        )


def _open_transcript(path: Path) -> IO[bytes]:
    def checked_open() -> IO[bytes]:
        _check_size(path)
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


def _decoded_lines(path: Path) -> Iterator[tuple[int, str]]:
    with _open_transcript(path) as source:
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
