"""An exchange whose words cleaning removes entirely is kept as said (issue 30)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.conversations import LoggedMessage
from memory.formation.cleaning import clean_transcript
from memory.formation.exchanges import Exchange
from memory.formation.shaping import shape_exchanges
from memory.formation.summarizer import ExchangeSummarizer
from memory.llm import LLMClient
from memory.types import MemoryMode, MessageRole
from models import Personality

AT = datetime(2024, 4, 15, 7, 10, tzinfo=UTC)


def _exchange(said: str, answer: str) -> Exchange:
    user = LoggedMessage("u1", "1002", "Bob", MessageRole.USER, said, AT)
    reply = LoggedMessage("r1", "sage", "Sage", MessageRole.ASSISTANT, answer, AT, reply_to="u1")
    return Exchange("1002", (user,), (reply,), ())


@pytest.mark.parametrize("mode", [MemoryMode.SUMMARIZED, MemoryMode.HYBRID])
async def test_an_emoji_only_exchange_is_stored_as_said(mode: MemoryMode) -> None:
    exchange = _exchange("🎉🎂🥳", "🌿✨ 🫖")
    [shaped] = await shape_exchanges(
        [(exchange, mode)],
        Personality(display_name="Sage"),
        None,
        None,
        summarizer=ExchangeSummarizer(LLMClient()),
        min_summarize_tokens=48,
    )
    assert shaped.content == "Bob: 🎉🎂🥳\nSage: 🌿✨ 🫖"


def test_a_line_emptied_by_cleaning_keeps_what_was_said() -> None:
    cleaned = clean_transcript("Bob: *waves* hi Sage!!! 😀\nSage: 👍\nSage: *nods* Hello Bob.")
    assert cleaned == "Bob: hi Sage!\nSage: 👍\nSage: Hello Bob."
    assert clean_transcript("User: 😀\nSage: 🌿") == "User: 😀\nSage: 🌿"
