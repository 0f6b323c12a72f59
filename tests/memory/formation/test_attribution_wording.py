"""Who said what, across a verb's spellings, a thank-you and an acknowledgement (issue 30)."""

from __future__ import annotations

import pytest

from memory.formation.attribution import check_attribution, exchange_lines

WEEKENDS = "Priya: Hiking, dancing and baking fill my weekends now.\nTom: Lucky you!"
DRIVE = "Tom: Thanks for driving me to the airport, it saved my trip.\nPriya: Anytime!"
CAT = "Mia: And thanks for asking, we got another cat named Pepper too.\nLeo: So cute!"
CRASH = "Priya: Oh no, that must have been scary.\nTom: I crashed the car on the motorway, but I'm fine."


@pytest.mark.parametrize(
    ("exchange", "summary"),
    [
        # "hike" meets "hiking", "bake" meets "baking": the e an -ing drops makes no other word.
        (WEEKENDS, "Priya likes to hike, dance and bake."),
        # A thank-you says what the one thanked did.
        (DRIVE, "Priya drove Tom to the airport."),
        # Acknowledging is saying: Priya said it, of Tom's crash.
        (CRASH, "Priya acknowledged Tom's car crash on the motorway."),
    ],
)
def test_a_correct_summary_is_kept(exchange: str, summary: str) -> None:
    verdict = check_attribution(summary, exchange_lines(exchange))
    assert not verdict.wrong, verdict.detail()
    assert verdict.checked == 1


@pytest.mark.parametrize(
    ("exchange", "summary"),
    [
        (WEEKENDS, "Tom likes to hike, dance and bake."),
        # The thanks covers its own clause: the cat is still the thanker's.
        (CAT, "Leo got another cat named Pepper."),
    ],
)
def test_the_same_facts_given_to_the_other_speaker_are_swapped(exchange: str, summary: str) -> None:
    assert check_attribution(summary, exchange_lines(exchange)).swapped == [summary]
