"""split_message: parts within Discord's limit, cut at paragraph or sentence boundaries."""

from __future__ import annotations

from bot.messages import split_message


def test_short_text_is_one_part() -> None:
    assert split_message("hello") == ["hello"]
    assert split_message("   ") == []


def test_splits_at_paragraphs() -> None:
    first = "a" * 1500
    second = "b" * 1500
    assert split_message(f"{first}\n\n{second}") == [first, second]


def test_splits_at_sentences() -> None:
    sentence = "This is a sentence of moderate length. "
    text = sentence * 120
    parts = split_message(text)
    assert len(parts) > 1
    assert all(len(p) <= 2000 for p in parts)
    assert all(p.endswith(".") for p in parts)
    assert " ".join(parts) == text.strip()


def test_hard_cut_without_boundaries() -> None:
    text = "x" * 4500
    parts = split_message(text)
    assert [len(p) for p in parts] == [2000, 2000, 500]
    assert "".join(parts) == text


def test_custom_limit() -> None:
    parts = split_message("one two three four five six", limit=10)
    assert all(len(p) <= 10 for p in parts)
    assert " ".join(parts) == "one two three four five six"
