"""Issue 30's last two real-model faults, as the attribution check sees them: an event nobody said, with
no name or number for the fact checks to find, and what was only asked stated as a fact even where
the reply speaks of the same things."""

from __future__ import annotations

import pytest

from memory.formation.attribution import check_attribution, exchange_lines

BONSAI = (
    "Bob: hey Sage, how often do you water a bonsai??? mine looks thirsty\n"
    "Sage: Every few days in summer, Bob: give your bonsai water whenever the top of its soil feels dry."
)
TOMATOES = "Alice: I planted the tomatoes today.\nSage: Lovely, Alice. Keep them watered."
GINA = (
    "Gina: Thanks! Taking risks is scary but it's the only way to grow, right?\n"
    "Jon: Thanks for having my back, Gina."
)


@pytest.mark.parametrize(
    "event",
    [
        "Alice and Sage went camping by the lake with their cousins.",
        "They were at a birthday party with their children.",
    ],
)
def test_an_event_nobody_said_is_refused(event: str) -> None:
    verdict = check_attribution(f"Alice planted tomatoes. {event}", exchange_lines(TOMATOES))
    assert verdict.unsaid == [event] and verdict.wrong


@pytest.mark.parametrize(
    "summary",
    [
        "Alice planted tomatoes, and Sage told her to keep them watered.",
        "Jon expressed gratitude for Gina's support.",  # two words of its own: a paraphrase
    ],
)
def test_a_paraphrase_is_no_event(summary: str) -> None:
    exchange = GINA if "Jon" in summary else TOMATOES
    assert check_attribution(summary, exchange_lines(exchange)).unsaid == []


def test_a_question_repeated_as_a_statement_is_refused_though_the_reply_speaks_of_it() -> None:
    verdict = check_attribution("Sage water a bonsai.", exchange_lines(BONSAI))
    assert verdict.questions == ["Sage water a bonsai."]


@pytest.mark.parametrize(
    ("exchange", "summary"),
    [
        (BONSAI, "Bob asked how often to water a bonsai."),  # said to be asked
        (BONSAI, "Did Sage water a bonsai."),  # still a question, its mark lost
        (GINA, "Gina said taking risks is the only way to grow."),  # "..., right?" asks nothing
        (GINA, "Taking risks is the only way to grow."),
    ],
)
def test_what_is_asked_or_reported_is_no_stated_question(exchange: str, summary: str) -> None:
    assert check_attribution(summary, exchange_lines(exchange)).questions == []
