"""bench.recall_quality scores what it should: a tiny transcript through import and recall, no timings."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.recall_quality import evidence_recall, measure
from bench.recall_sets import Dialogue, Question, synthetic_dialogue
from memory.llm import LLMClient
from memory.owners.personalities import PersonalityService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder
from memory.service import RecalledMemory
from memory.types import MemoryMode
from testkit.memory_service import make_services

TURNS = [
    ("t1", "user", "Good morning! The weather is grey again."),
    ("t2", "assistant", "Morning! Grey skies, cosy inside."),
    ("t3", "user", "My friend Zephyrine moved to Valparaiso last week."),
    ("t4", "assistant", "Valparaiso! Colourful city."),
    ("t5", "user", "I baked bread tonight."),
    ("t6", "assistant", "Smells lovely, I bet."),
]


def recalled(*sources: list[str], content: str = "a b c") -> list[RecalledMemory]:
    at = datetime(2024, 1, 1, tzinfo=UTC)
    return [
        RecalledMemory(
            id=uuid.uuid4(),
            content=content,
            content_verbatim=None,
            source_message_ids=list(s),
            occurred_at=at,
            summarized=False,
            summarizer="verbatim",
            pinned=False,
            conversation_id=None,
            times_said=1,
            repeat_of=None,
            edited_at=None,
            score=1.0,
        )
        for s in sources
    ]


def test_evidence_recall_is_the_share_of_evidence_in_the_top_k() -> None:
    question = Question("?", ("a", "b", "c", "d"), "x")
    found = recalled(["a", "z"], ["b"], *[["y"]] * 3, ["c"])
    assert evidence_recall(question, found, 10) == 0.75
    assert evidence_recall(question, found, 5) == 0.5
    assert evidence_recall(question, [], 10) == 0.0


async def test_the_harness_imports_a_transcript_and_scores_recall(
    sessionmaker: async_sessionmaker[AsyncSession], embedder: Embedder, tmp_path: Path
) -> None:
    index = EdgeVectorIndex(tmp_path / "qdrant")
    services = make_services(sessionmaker, index, embedder, LLMClient(), None)
    dialogue = Dialogue(
        name="tiny",
        user_id="ana",
        personality_name="Mira",
        lines=[
            {"id": i, "role": role, "content": text, "author": "Ana" if role == "user" else "Mira"}
            for i, role, text in TURNS
        ],
        questions=[
            Question("Where did Zephyrine move?", ("t3",), "fact"),
            Question("Where did Zephyrine move, and what is missing?", ("t3", "never-said"), "half"),
        ],
    )
    try:
        result = await measure(
            services.memory,
            embedder,
            services.transfer,
            PersonalityService(sessionmaker),
            dialogue,
            MemoryMode.VERBATIM,
            tmp_path,
            runs=2,
        )
    finally:
        await index.close()
    assert result.scores.at10 == [1.0, 0.5]
    assert result.scores.by_category == {"fact": ([1.0], [1.0]), "half": ([0.5], [0.5])}
    # All three exchanges recalled (the limit is 10), each line "Name: text".
    words = sum(1 + len(text.split()) for _, _, text in TURNS)
    assert result.scores.words == [words, words]
    assert [len(run) for run in result.latencies] == [2, 2]
    assert len(result.embedding) == 2


def test_the_synthetic_set_is_long_and_names_real_evidence() -> None:
    dialogue = synthetic_dialogue(exchanges=600, seed=3)
    ids = {line["id"] for line in dialogue.lines}
    assert len(dialogue.lines) == 1200
    assert {q.category for q in dialogue.questions} == {"near-duplicate", "correction", "relative-date"}
    assert all(set(q.evidence) <= ids for q in dialogue.questions)
    assert synthetic_dialogue(exchanges=600, seed=3).questions == dialogue.questions  # seeded
