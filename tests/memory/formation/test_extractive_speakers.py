"""The extractive summary keeps each sentence under its own speaker's label (issue 30)."""

from __future__ import annotations

import pytest

from memory.formation.extractive import extractive_summary
from memory.tokens import count_tokens

ELDORIA = (
    "Alex: What is this place, exactly? Eldoria? I woke up in a forest and I do not remember anything "
    "at all about how I got here.\n"
    "Seraphina: This is Eldoria, a realm of ancient magic and deep woods. You were hurt by the wolves "
    "near the border. Shadowfang, the dark forest to the north, is where the wolves come from."
)


def _speaker_of(summary: str, sentence: str) -> str:
    for line in summary.splitlines():
        if sentence in line:
            return line.partition(": ")[0]
    raise AssertionError(f"{sentence!r} not in {summary!r}")


@pytest.mark.parametrize("budget", [20, 30, 45, 60])
def test_a_reply_sentence_stays_under_the_reply_speaker(budget: int) -> None:
    summary = extractive_summary(ELDORIA, budget)
    assert count_tokens(summary) <= budget
    for line in summary.splitlines():
        speaker = line.partition(": ")[0]
        assert speaker in ("Alex", "Seraphina"), summary
    if "Shadowfang" in summary:
        assert _speaker_of(summary, "Shadowfang") == "Seraphina"
    if "Eldoria?" in summary:
        assert _speaker_of(summary, "Eldoria?") == "Alex"


def test_a_later_line_of_a_message_stays_with_its_speaker() -> None:
    text = (
        "Bob: morning Sage training update, I'm running the Riverside 10k on May 5th!\n"
        "first race ever, I'm 38 and my knees sound like bubble wrap\n"
        "Sage: There's something brave about starting at 38. What's your goal time? "
        + " ".join(f"Filler sentence number {i} says very little of use." for i in range(8))
        + "\nBob: under an hour would be a dream. currently at 1:04"
    )
    summary = extractive_summary(text, 50)
    assert "1:04" in summary and _speaker_of(summary, "1:04") == "Bob"
    for sentence in ("brave", "goal time"):
        if sentence in summary:
            assert _speaker_of(summary, sentence) == "Sage", summary


def test_text_without_labels_is_summarized_as_before() -> None:
    text = " ".join(f"Sentence {i} about Lisbon and the number {i}." for i in range(30))
    summary = extractive_summary(text, 30)
    assert summary and ": " not in summary and count_tokens(summary) <= 30
