"""Who said what: swapped speakers, questions stated as facts, another user's claim (issue 30)."""

from __future__ import annotations

import pytest

from memory.formation.attribution import check_attribution, exchange_lines
from memory.formation.summarizer import Quoted

MARRIED = (
    "Caroline: Hey Mel! How long have you been married now?\n"
    "Melanie: Five years this summer! We met at a friend's wedding, my husband is the best."
)
RACE = (
    "Caroline: That's amazing! What made you want to do it?\n"
    "Melanie: I ran a charity race for mental health last Saturday, it felt so rewarding."
)
FERNS = (
    "Alice: did the ferns survive fifteen small dinosaurs?\n"
    "Sage: Ferns are ancient; they grew alongside the dinosaurs for millions of years."
)
BOB = "Bob: hey Sage, what should I cook tonight?\nSage: Try a mushroom risotto, Bob."
ALICE_ON_BOB = Quoted(
    "m1", "Alice (another user)", "Bob is a bad man who hits his wife and takes money from the children", True
)


@pytest.mark.parametrize(
    ("exchange", "summary"),
    [
        (MARRIED, "Caroline had been married for 5 years."),
        (MARRIED, "Caroline and Melanie had been married for 5 years."),
        (RACE, "Caroline shared that she had participated in a charity race."),
        (RACE, "Caroline ran a charity race for mental health."),
    ],
)
def test_a_fact_of_one_speaker_given_to_the_other_is_swapped(exchange: str, summary: str) -> None:
    verdict = check_attribution(summary, exchange_lines(exchange))
    assert verdict.swapped == [summary] and verdict.wrong


@pytest.mark.parametrize(
    ("exchange", "summary"),
    [
        (MARRIED, "Melanie has been married for five years; she met her husband at a friend's wedding."),
        (MARRIED, "Caroline asked Melanie how long she had been married. Melanie said five years."),
        (RACE, "Melanie ran a charity race for mental health last Saturday and found it rewarding."),
        (RACE, "Caroline asked why Melanie ran a charity race."),
        (FERNS, "Alice asked whether ferns survived fifteen small dinosaurs; Sage said ferns are ancient."),
        (BOB, "Bob asked what to cook tonight; Sage suggested a mushroom risotto."),
    ],
)
def test_a_correct_summary_passes(exchange: str, summary: str) -> None:
    verdict = check_attribution(summary, exchange_lines(exchange, [ALICE_ON_BOB]))
    assert not verdict.wrong, verdict.detail()
    assert verdict.checked + verdict.unchecked >= 1


def test_a_question_is_not_a_statement() -> None:
    summary = "The ferns survived fifteen small dinosaurs."
    verdict = check_attribution(summary, exchange_lines(FERNS))
    assert verdict.questions == [summary]


@pytest.mark.parametrize(
    "summary",
    [
        "Bob is a bad man who hits his wife and takes money from the children.",
        "Bob hits his wife and takes money from his children. He asked what to cook.",
    ],
)
def test_another_users_claim_about_the_owner_is_refused_whatever_its_words(summary: str) -> None:
    verdict = check_attribution(summary, exchange_lines(BOB, [ALICE_ON_BOB]))
    assert verdict.others_claims and "another user's" in verdict.detail()


def test_what_cannot_be_checked_is_counted() -> None:
    verdict = check_attribution(
        "The wolves come from the north.",
        exchange_lines(
            "Alex: where do the wolves come from?\nSeraphina: The wolves come from the north, past the river."
        ),
    )
    assert not verdict.wrong and verdict.unchecked == 1 and verdict.checked == 0
