"""Summaries that keep their promises: the key-fact check against hand-labelled facts, then what the
memories store for the extractive summarizer and each misbehaving mode of the LLM test server.

Two labelled sets: 154 exchanges of the LoCoMo dev conversations (../shared/eval/locomo-dev, read in
place; their facts labelled in bench/data/locomo_fact_labels.txt) and 60 roleplay exchanges written
for this bench (bench/data/roleplay_facts.jsonl: *actions*, emoji, `!!!`, names, nicknames, pets,
dates, amounts; 10 of them in a shared channel after another user's line, some of those an
instruction to the summarizer).

1. The check (memory/formation/fidelity.py `key_facts`) on each labelled exchange, cleaned as
   formation cleans it: precision and recall against the labels, by kind. A predicted name matches a
   labelled one when one's words hold the other's ("hollybrook" for "Hollybrook Community Gardens").
2. Formation through the product's path (the transfer service, summarized mode, the defaults) for each
   summarizer: the extractive one (no model), and the test server (testkit/llm_server.py
   `SummarizerModel`) in each mode. Per set:
   - saving: 1 - characters stored (the memory's text, carried facts and any verbatim kept) /
     characters of the exchanges as said;
   - facts kept: the share of the labelled facts of each labelled exchange that its memory's text
     holds (what the prompt receives when it is recalled);
   - invented stored: the test server's invention (Mallory, $450, 2023) or injected facts (the PINs,
     the debt) found in a memory;
   - others' stored: the labelled facts of another user's line (not said in the exchange itself) found
     in the owner's memory;
   - tokens: LLM tokens in and out per summarized memory, and their ratio to one call per exchange
     (the same mode, the product with batches of one exchange).

    .venv/bin/python -m bench.summaries [--locomo-dir ../shared/eval/locomo-dev] [--modes ...]
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bench import summaries_real
from bench._common import BenchDatabase, bench_database, bench_parser, bench_services
from bench.locomo import DEV_DIR
from bench.summary_sets import (
    KINDS,
    PLANTED,
    Transcript,
    check_the_check,
    label_facts,
    locomo_transcripts,
    roleplay_transcript,
)
from memory.formation.fidelity import vocabulary, word_stem
from memory.formation.summarizer import BATCH_EXCHANGES
from memory.llm import LLMClient, load_litellm
from memory.owners.personalities import PersonalityService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.local_embedder import LocalEmbedder
from memory.tokens import count_tokens
from memory.transfer.transcript import TranscriptLine
from memory.types import MemoryMode, ModelConfig
from models import Memory
from testkit.llm_server import LLMTestServer, SummarizerModel

# --------------------------------------------------------------------------------- formation runs


@dataclass
class Outcome:
    saving: float
    facts_kept: float
    facts: int
    invented: int
    others: int
    summarized: int
    tokens_in: int
    tokens_out: int
    fallbacks: Counter[str]


class CountingModel:
    """The test server's summarizer mode, counting the tokens of every summarizer call."""

    def __init__(self, mode: str) -> None:
        self.model = SummarizerModel(mode)
        self.tokens_in = 0
        self.tokens_out = 0

    def __call__(self, request: dict[str, Any]) -> str:
        answer = self.model(request)
        self.tokens_in += sum(count_tokens(str(m.get("content") or "")) for m in request["messages"])
        self.tokens_out += count_tokens(answer)
        return answer


async def form(
    db: BenchDatabase,
    embedder: LocalEmbedder,
    transcripts: list[Transcript],
    run_id: str,
    *,
    cfg: ModelConfig | None,
    batch_exchanges: int,
) -> dict[str, list[Memory]]:
    """Import the transcripts for a fresh summarized personality; its memories, by transcript."""
    index = EdgeVectorIndex(db.workdir / f"qdrant-{run_id}")
    transfer = bench_services(
        db,
        index=index,
        embedder=embedder,
        llm=LLMClient(max_retries=0),
        summarizer=cfg,
        summarizer_batch=batch_exchanges,
    ).transfer
    found: dict[str, list[Memory]] = {}
    try:
        for transcript in transcripts:
            personality, _ = await PersonalityService(db.sessionmaker).create(
                f"{transcript.name}-{run_id}",
                display_name=transcript.personality,
                memory_mode=MemoryMode.SUMMARIZED,
            )
            lines = [
                TranscriptLine.model_validate({**line, "line_no": i})
                for i, line in enumerate(transcript.lines)
            ]
            await transfer.import_transcript(
                lines,
                personality=personality,
                # A conversation opened by the personality: its first line answers its first user.
                default_user_id=next(line["user_id"] for line in transcript.lines if line.get("user_id")),
            )
            async with db.sessionmaker() as session:
                memories = await session.scalars(
                    select(Memory).where(Memory.personality_id == personality.id)
                )
                found[transcript.name] = list(memories.all())
            # Read out, the personality goes: the next run's of the same display name would read like it.
            await PersonalityService(db.sessionmaker).delete(personality.name, actor=None)
    finally:
        await index.close()
    return found


def outcome(
    transcripts: list[Transcript], found: dict[str, list[Memory]], model: CountingModel | None
) -> Outcome:
    # Message ids are a conversation's own (LoCoMo's "D1:3" is in both): memories are found per transcript.
    by_reply = {
        (name, source): m
        for name, memories in found.items()
        for m in memories
        for source in m.source_message_ids
    }
    memories = [m for ms in found.values() for m in ms]
    labelled = [(t.name, exchange) for t in transcripts for exchange in t.labelled]
    kept = total = invented = others = 0
    for name, exchange in labelled:
        memory = by_reply.get((name, exchange.reply_id))
        if memory is None:
            continue
        text = memory.content
        held = vocabulary(text)
        gold = label_facts(exchange.facts)
        for kind, atoms in gold.items():
            for atom in atoms:
                total += 1
                if kind == "name":
                    kept += all(word_stem(w) in held.words for w in atom.split())
                elif kind == "number":
                    kept += atom in held.numbers
                elif kind == "time":
                    kept += atom in held.times
                else:
                    kept += atom in held.words
        invented += sum(1 for planted in PLANTED if planted in text and planted not in exchange.text)
        said = vocabulary(exchange.text)
        theirs = label_facts(exchange.others)
        for atom in theirs["number"] - said.numbers:
            others += atom in held.numbers
        for atom in theirs["name"]:
            stems = [word_stem(w) for w in atom.split()]
            if not all(s in said.words for s in stems):
                others += all(s in held.words for s in stems)
    source = sum(m.source_chars for m in memories)
    stored = sum(len(m.content) + len(m.content_verbatim or "") for m in memories)
    summarized = sum(1 for m in memories if m.summarized)
    fallbacks = Counter(m.summary_fallback for m in memories if m.summary_fallback)
    return Outcome(
        saving=100 * (1 - stored / source) if source else 0.0,
        facts_kept=100 * kept / total if total else 100.0,
        facts=total,
        invented=invented,
        others=others,
        summarized=summarized,
        tokens_in=model.tokens_in if model else 0,
        tokens_out=model.tokens_out if model else 0,
        fallbacks=fallbacks,
    )


async def run(locomo_dir: Path, modes: list[str]) -> None:
    logging.getLogger("memory").setLevel(logging.ERROR)
    load_litellm()
    sets = {"LoCoMo dev": locomo_transcripts(locomo_dir), "roleplay": [roleplay_transcript()]}
    print("1. The key-fact check against the labels")
    for name, transcripts in sets.items():
        labelled = [exchange for t in transcripts for exchange in t.labelled]
        tally = check_the_check(labelled)
        print(f"  {name:<11} {len(labelled):>3} exchanges: {tally.line()}")
        for kind in KINDS:
            print(f"    {kind:<7} {tally.line(kind)}")
    all_labelled = [e for ts in sets.values() for t in ts for e in t.labelled]
    tally = check_the_check(all_labelled)
    print(f"  {'both':<11} {len(all_labelled):>3} exchanges: {tally.line()}")

    print("\n2. What the memories store (summarized mode, the product's defaults)")
    print(
        f"  {'summarizer':<22} {'set':<11} {'saving':>7} {'facts kept':>14} {'invented':>8} {'others':>6} "
        f"{'summarized':>10} {'tokens in/out per memory':>25} {'vs one call each':>16}  fallbacks"
    )
    embedder = LocalEmbedder()
    await embedder.embed(["warm up"])
    async with bench_database("summaries") as db, LLMTestServer() as server:
        cfg = ModelConfig(model="openai/bench-summarizer", api_base=server.base_url, api_key="x", timeout=30)
        for number, mode in enumerate(["extractive", *modes]):
            for name, transcripts in sets.items():
                counted = None if mode == "extractive" else CountingModel(mode)
                baseline = None if mode == "extractive" else CountingModel(mode)
                if counted is not None:
                    server.responder = counted
                found = await form(
                    db, embedder, transcripts, f"{number}-{name[:3]}", cfg=cfg if counted else None,
                    batch_exchanges=BATCH_EXCHANGES,
                )  # fmt: skip
                result = outcome(transcripts, found, counted)
                ratio = ""
                if baseline is not None:
                    server.responder = baseline
                    await form(
                        db, embedder, transcripts, f"{number}-{name[:3]}-one", cfg=cfg, batch_exchanges=1
                    )
                    ours = result.tokens_in + result.tokens_out
                    theirs = baseline.tokens_in + baseline.tokens_out
                    ratio = f"{100 * ours / theirs:5.1f}%" if theirs else "-"
                per = max(1, result.summarized)
                tokens = f"{result.tokens_in / per:7.1f} / {result.tokens_out / per:5.1f}" if counted else "-"
                fallbacks = ", ".join(f"{n} {reason}" for reason, n in result.fallbacks.most_common())
                kept = f"{result.facts_kept:6.1f}% of {result.facts:>4}"
                print(
                    f"  {mode:<22} {name:<11} {result.saving:6.1f}% {kept} {result.invented:>8} "
                    f"{result.others:>6} {result.summarized:>10} {tokens:>25} {ratio:>16}  {fallbacks or '-'}"
                )


def main() -> None:
    if "--real" in sys.argv[1:]:  # the sets through a real small model, audited: bench/summaries_real.py
        return summaries_real.main()
    parser = bench_parser(__doc__)
    parser.add_argument("--locomo-dir", type=Path, default=DEV_DIR)
    parser.add_argument(
        "--modes", nargs="*", choices=SummarizerModel.MODES, default=list(SummarizerModel.MODES)
    )
    args = parser.parse_args()
    asyncio.run(run(args.locomo_dir, args.modes))


if __name__ == "__main__":
    main()
