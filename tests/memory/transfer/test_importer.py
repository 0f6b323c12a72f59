"""Transcript validation: every line checked as it is read, each problem named by its line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory.errors import InvalidInputError
from memory.transfer.transcript import (
    MAX_CONTENT_CHARS,
    MAX_TRANSCRIPT_BYTES,
    parse_transcript,
    read_transcript,
)
from memory.types import MessageRole


def jsonl(*records: object) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records)


def test_valid_lines_are_read_and_blank_or_empty_ones_skipped() -> None:
    text = jsonl(
        {"id": 1, "role": "user", "content": "hi", "user_id": 42, "timestamp": "2024-03-15T18:00:00Z"},
        "",
        {"id": "b", "role": "assistant", "content": "   "},
        {"id": "c", "role": "assistant", "content": "hello", "author": "", "timestamp": "2024-03-15T18:01"},
        {"id": "d", "role": "user", "content": "x", "memory": {"exported": True}},  # export keys ignored
    )
    lines, skipped = parse_transcript(text)
    assert skipped == 2
    assert [(line.line_no, line.id, line.role) for line in lines] == [
        (1, "1", MessageRole.USER),
        (4, "c", MessageRole.ASSISTANT),
        (5, "d", MessageRole.USER),
    ]
    assert lines[0].user_id == "42" and lines[1].author is None
    assert lines[0].timestamp == datetime(2024, 3, 15, 18, 0, tzinfo=UTC)
    assert lines[1].timestamp == datetime(2024, 3, 15, 18, 1, tzinfo=UTC)  # no zone: UTC


def test_an_exports_persona_lines_are_read_past_not_refused() -> None:
    persona = {"persona": {"personality": None, "name": "Alice", "pronouns": "she/her", "about": "a baker"}}
    text = jsonl(persona, {"id": "m1", "role": "user", "content": "hi"})
    lines, skipped = parse_transcript(text)
    assert [line.id for line in lines] == ["m1"] and skipped == 0
    # A line with a role is a message whatever else it carries, and is checked as one.
    with pytest.raises(InvalidInputError, match="line 1"):
        parse_transcript(jsonl({"persona": {}, "role": "user"}))


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ("{not json", "line 2: not valid JSON (Expecting property name enclosed in double quotes)"),
        ("[1, 2]", "line 2: expected a JSON object"),
        ({"content": "x"}, "line 2: missing required field(s) id, role"),
        ({"id": "", "role": "user", "content": "x"}, "line 2: 'id' is empty"),
        ({"id": True, "role": "user", "content": "x"}, "line 2: 'id' must be a string"),
        ({"id": "x" * 65, "role": "user", "content": "x"}, "line 2: 'id' is longer than 64 characters"),
        ({"id": "b", "role": "system", "content": "x"}, 'line 2: \'role\' must be "user" or "assistant"'),
        ({"id": "b", "role": "user", "content": 5}, "line 2: 'content' must be a string"),
        (
            {"id": "b", "role": "user", "content": "x" * (MAX_CONTENT_CHARS + 1)},
            f"line 2: 'content' is over {MAX_CONTENT_CHARS} characters",
        ),
        (
            {"id": "b", "role": "user", "content": "x", "timestamp": "soon"},
            "line 2: 'timestamp' is not ISO-8601",
        ),
        ({"id": "b", "role": "user", "content": "x", "guild_id": [1]}, "line 2: 'guild_id' must be a string"),
    ],
)
def test_a_bad_line_is_refused_in_one_line_naming_it(record: object, message: str) -> None:
    text = jsonl({"id": "a", "role": "user", "content": "fine"}, record)
    with pytest.raises(InvalidInputError) as info:
        parse_transcript(text)
    assert str(info.value) == message


def test_an_oversized_transcript_is_refused_before_it_is_read(tmp_path: Path) -> None:
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as out:
        out.truncate(MAX_TRANSCRIPT_BYTES + 1)  # sparse: nothing is written to disk
    with pytest.raises(InvalidInputError) as refused:
        read_transcript(huge)
    assert "MiB" in str(refused.value) and "split it" in str(refused.value)
    fits = tmp_path / "fits.jsonl"
    fits.write_text('{"id": "1", "role": "user", "content": "hello"}\n', encoding="utf-8")
    assert len(read_transcript(fits)[0]) == 1


@pytest.mark.parametrize("breaker", ["\u2028", "\u2029", "\u0085"])
def test_a_line_separator_inside_a_string_stays_in_its_line(breaker: str) -> None:
    """JSONL lines end at "\\n" only: U+2028, U+2029 and U+0085 may stand raw in a JSON string (an
    export of what users said holds them), where str.splitlines() would cut the line."""
    said = {"id": "1", "role": "user", "content": f"a{breaker}b"}
    text = (
        json.dumps(said, ensure_ascii=False)
        + "\r\n"
        + json.dumps({"id": "2", "role": "assistant", "content": "c"})
    )
    lines, skipped = parse_transcript(text)
    assert [(line.line_no, line.content) for line in lines] == [(1, f"a{breaker}b"), (2, "c")]
    assert skipped == 0


def test_a_byte_order_mark_at_the_start_is_read_past(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + jsonl({"id": "1", "role": "user", "content": "hi"}).encode())
    assert [line.content for line in read_transcript(path)[0]] == ["hi"]
    assert [
        line.id for line in parse_transcript("\ufeff" + jsonl({"id": "1", "role": "user", "content": "x"}))[0]
    ] == ["1"]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            '{"id": "b", "role": "user", "content": "x", "n": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "line 2: JSON nested too deeply for a transcript line",
        ),
        (
            '{"id": ' + "9" * 5000 + ', "role": "user", "content": "x"}',
            "line 2: not valid JSON (a number longer than 4300 digits)",
        ),
        (
            {"id": "b", "role": "user", "content": "x", "timestamp": "9999-12-31T23:59:59-12:00"},
            "line 2: 'timestamp' is out of range (years 1 to 9999 in UTC)",
        ),
        (
            {"id": "b", "role": "user", "content": "x", "timestamp": "0001-01-01T00:00:00+14:00"},
            "line 2: 'timestamp' is out of range (years 1 to 9999 in UTC)",
        ),
        (
            {"id": "b\u0000", "role": "user", "content": "x"},
            "line 2: 'id' holds a NUL or an unpaired surrogate",
        ),
        (
            {"id": "b", "role": "user", "content": "x", "user_id": "\ud800"},
            "line 2: 'user_id' holds a NUL or an unpaired surrogate",
        ),
    ],
)
def test_values_past_what_can_be_stored_are_refused_in_one_line(record: object, message: str) -> None:
    text = jsonl({"id": "a", "role": "user", "content": "fine"}, record)
    with pytest.raises(InvalidInputError) as info:
        parse_transcript(text)
    assert str(info.value) == message
