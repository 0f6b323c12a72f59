"""/personality resummarize says why memories were left as they were: a summarizer that answered and
whose summaries were rejected is not called unavailable (issue 34)."""

from __future__ import annotations

from collections import Counter

from bot.personality.texts import resummarize_report
from memory.service import FormationReport
from models import Personality


def test_rejected_summaries_are_not_called_an_unavailable_summarizer() -> None:
    sage = Personality(name="sage", display_name="Sage")
    rejected = FormationReport(
        exchanges=5, memories=3, extractive=2, fallbacks=Counter({"invented": 1, "other_user": 1})
    )
    assert resummarize_report(sage, rejected) == (
        "Re-summarized 3 of 5 memories of Sage; 2 left as they were (2 whose summaries were rejected "
        "(1 a fact nobody said, 1 another user's facts)), 0 carry the facts their summary dropped."
    )
    down = FormationReport(exchanges=4, memories=1, extractive=3, fallbacks=Counter({"unreachable": 3}))
    assert "3 left as they were (3 with the summarizer unavailable)" in resummarize_report(sage, down)
    clean = FormationReport(exchanges=2, memories=2, fidelity_misses=1)
    assert resummarize_report(sage, clean).endswith(
        "2 of 2 memories of Sage; 0 left as they were, 1 carry the facts their summary dropped."
    )
