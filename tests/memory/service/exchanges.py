"""The exchange the service's tests summarize, in roleplay style, and the faithful summary of it."""

from __future__ import annotations

from typing import Any

FAITHFUL_SUMMARY = (
    "Alice's sister Leila moved to Porto on March 15th with the cat Mochi; "
    "the flat at Rua das Flores 42 costs 950 euros."
)
LONG_USER = (
    "*sits down heavily* ugh what a week!!! 😩 So my sister Leila finally moved to Porto on March 15th, "
    "and I drove her there with the cat Mochi in the back seat lol. The flat is on Rua das Flores 42 and "
    "costs 950 euros a month, which is honestly a steal for the centre haha. We spent the whole weekend "
    "assembling furniture and arguing about where the bookshelf should go."
)
LONG_REPLY = (
    "*leans on the counter, grinning* Porto! Leila picked well. 950 euros on Rua das Flores is a bargain, "
    "and Mochi will love the sunny windows. Tell me how the bookshelf war ends!!! 📚✨"
)


def summary_responder(text: str) -> Any:
    return lambda request: text
