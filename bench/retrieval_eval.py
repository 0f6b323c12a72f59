"""Retrieval quality: recall@5 and recall@10 of each side of the search (dense, keyword) and of the
product's recall (`MemoryService.recall`: both sides fused, with neighbours), per mode. The fast
regression eval; bench.recall_quality measures long conversations.

A few hundred messages of written conversations (bench/data/eval_conversations.jsonl) are imported
for one personality in each memory mode; each question in bench/data/eval_questions.jsonl names the
messages that hold its answer, and a hit is a recalled memory formed from one of them. Summaries come
from SUMMARIZER_MODEL when set (any litellm model), else from the extractive summarizer.

    .venv/bin/python -m bench.retrieval_eval
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sqlalchemy import select

from bench._common import bench_database
from bench.recall_quality import eval_services, summarizer_config
from memory.owners.personalities import PersonalityService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.keywords import encode_sparse_query
from memory.recall.local_embedder import LocalEmbedder
from memory.transfer.transcript import read_transcript
from memory.types import MemoryMode, RecallFilter
from models import Memory

DATA = Path(__file__).resolve().parent / "data"
METHODS = ("dense", "keyword", "fused")


async def run() -> None:
    lines, _ = read_transcript(DATA / "eval_conversations.jsonl")
    questions = [json.loads(q) for q in (DATA / "eval_questions.jsonl").read_text().splitlines() if q.strip()]
    embedder = LocalEmbedder()
    cfg = summarizer_config()
    print(
        f"{len(lines)} messages, {len(questions)} questions; "
        f"summarizer: {cfg.model if cfg else 'extractive (no LLM)'}"
    )
    print(
        f"{'mode':<11} {'method':<8} {'recall@5':>9} {'recall@10':>10} {'memories':>9} "
        f"{'stored/verbatim':>16}"
    )
    async with bench_database("eval") as db:
        for mode in MemoryMode:
            index = EdgeVectorIndex(db.workdir / f"qdrant-{mode.value}")
            runtime = eval_services(db, index, embedder, cfg)
            service = runtime.memory
            personality, _ = await PersonalityService(db.sessionmaker).create(
                f"mira-{mode.value}", memory_mode=mode
            )
            await runtime.transfer.import_transcript(
                lines,
                personality=personality,
                default_user_id=None,
                mode=mode,
            )
            async with db.sessionmaker() as session:
                sources = {
                    m.id: set(m.source_message_ids)
                    for m in (
                        await session.scalars(select(Memory).where(Memory.personality_id == personality.id))
                    )
                }
            stats = await service.stats(personality_id=personality.id)
            hits = {(method, k): 0 for method in METHODS for k in (5, 10)}
            for question in questions:
                flt = RecallFilter(personality_id=personality.id, user_id=question["user_id"])
                dense = (await embedder.embed([question["query"]]))[0]
                found = await index.search(
                    dense=dense, sparse=encode_sparse_query(question["query"]), flt=flt, limit=10
                )
                recalled = await service.recall(
                    personality_id=personality.id,
                    user_id=question["user_id"],
                    query=question["query"],
                    limit=10,
                )
                answers = set(question["answer_ids"])
                ranked = {
                    "dense": [hit.id for hit in found.dense],
                    "keyword": [hit.id for hit in found.keyword],
                    "fused": [memory.id for memory in recalled],  # the product's recall, end to end
                }
                for method in METHODS:
                    for k in (5, 10):
                        hits[method, k] += any(sources.get(i, set()) & answers for i in ranked[method][:k])
            ratio = stats.stored_chars / stats.source_chars if stats.source_chars else 0
            for method in METHODS:
                print(
                    f"{mode.value:<11} {method:<8} {hits[method, 5] / len(questions):>9.2f} "
                    f"{hits[method, 10] / len(questions):>10.2f} {stats.memories:>9} {ratio:>16.2f}"
                )
            await index.close()


if __name__ == "__main__":
    asyncio.run(run())
