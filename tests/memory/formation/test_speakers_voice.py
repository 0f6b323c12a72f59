"""A model's answer in a speaker's voice is no summary (issue 30): SmolLM2-135M wrote "Caroline:
Melanie: Thank you, Caroline! I'm so glad you enjoyed the wedding." and "I'm a career counselor..." as
memories of LoCoMo dev 26, and every other check passed them."""

from __future__ import annotations

import pytest

from memory.formation.answers import in_a_speakers_voice
from memory.formation.judge import Asked, judge_answer
from memory.formation.summary_types import ExchangeText, FallbackReason

SPEAKERS = ("Caroline", "Melanie")


@pytest.mark.parametrize(
    "answer",
    [
        "Caroline: Melanie: Thank you, Caroline! I'm so glad you enjoyed the wedding.",
        "Melanie: the wedding was lovely.",
        "I'm a career counselor and I love my job.",
        "My painting of the lake is finished.",
    ],
)
def test_a_speaker_talking_is_no_summary(answer: str) -> None:
    assert in_a_speakers_voice(answer, SPEAKERS) is not None


@pytest.mark.parametrize(
    "answer",
    [
        "Caroline told Melanie she wants to become a counselor.",
        "Melanie said: I finished my painting of the lake.",  # whose "I" it is, said
        "Caroline asked: did the ferns survive?",
        "They talked about Imagine Dragons and the lake.",
    ],
)
def test_a_summary_about_its_speakers_stands(answer: str) -> None:
    assert in_a_speakers_voice(answer, SPEAKERS) is None


def test_the_judge_refuses_it_as_misattributed() -> None:
    text = "Caroline: I went to the support group yesterday.\nMelanie: That is wonderful, Caroline!"
    item = Asked(ExchangeText(text, names=SPEAKERS), source=text, tokens=20, cap=60)
    verdict = judge_answer(item, "I went to the support group yesterday.")
    assert verdict.reason is FallbackReason.MISATTRIBUTED
    assert judge_answer(item, "Caroline went to a support group yesterday.").reason is None
