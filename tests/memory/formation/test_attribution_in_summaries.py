"""The summarizer's judge asks who said what (issue 30): a summary whose names and numbers are all in
the exchange but given to the wrong speaker, or a question stored as a fact, is asked again alone and
then left for the extractive summary; it is never stored. Real PostgreSQL, Qdrant Edge, the local
embedder, the summarizer over HTTP."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.service import MemoryService
from testkit.llm_server import LLMTestServer
from testkit.memory_service import add_chat, add_personality, memories


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        # Alice asked; the marriage and the wedding in Lisbon are Sage's.
        ("Alice has been married for five years since her wedding in Lisbon.", "misattributed"),
        # Only asked, never said: the ferns' fate is a question in the exchange.
        ("The ferns survived fifteen small dinosaurs at the party.", "misattributed"),
    ],
    ids=["swapped", "question-as-fact"],
)
async def test_a_summary_giving_a_fact_to_the_wrong_speaker_is_never_stored(
    sessionmaker: async_sessionmaker[AsyncSession],
    summarizing_service: MemoryService,
    llm_server: LLMTestServer,
    answer: str,
    reason: str,
) -> None:
    p = await add_personality(sessionmaker, "Sage", "summarized")
    llm_server.responder = lambda body: answer
    turns = [
        ("user", "How long have you been married, Sage? And did the ferns survive fifteen small dinosaurs?"),
        (
            "assistant",
            "Five years this June, since our wedding in Lisbon. The party was wild: the band played until "
            "dawn, everyone sang along, and my cousins kept dancing on the terrace until sunrise!",
        ),
    ]
    await add_chat(sessionmaker, p, turns)
    await summarizing_service.form_pending()
    [memory] = await memories(sessionmaker)
    assert memory.content != answer and answer not in memory.content
    assert memory.summarizer == "extractive" and memory.summary_fallback == reason
    # Asked again alone before giving up on the model's text.
    assert len(llm_server.requests) >= 2


async def test_a_right_summary_is_kept(
    sessionmaker: async_sessionmaker[AsyncSession],
    summarizing_service: MemoryService,
    llm_server: LLMTestServer,
) -> None:
    p = await add_personality(sessionmaker, "Sage", "summarized")
    right = "Sage has been married for five years since a wedding in Lisbon."
    llm_server.responder = lambda body: right
    turns = [
        ("user", "How long have you been married, Sage? And did the ferns survive fifteen small dinosaurs?"),
        (
            "assistant",
            "Five years this June, since our wedding in Lisbon. The party was wild: the band played until "
            "dawn, everyone sang along, and my cousins kept dancing on the terrace until sunrise!",
        ),
    ]
    await add_chat(sessionmaker, p, turns)
    await summarizing_service.form_pending()
    [memory] = await memories(sessionmaker)
    assert memory.summary_fallback is None and right in memory.content
