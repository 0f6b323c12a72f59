"""Recall quality on long conversations: recall@5/@10 per question category, words recalled, latency.

Each dialogue is written as a JSONL transcript and imported through the same code path as
`personae import` (read_transcript + the transfer service) into one personality per memory mode; every
question is then asked through `MemoryService.recall` with limit 10, as `personae recall` does. A
question's recall is the share of its evidence messages found in the `source_message_ids` of the
memories returned; a set's score is the mean over its questions. The words of the 10 memories'
content are counted too: recall must not be bought with bigger memories.

Sets: the LoCoMo development conversations (../shared/eval/locomo-dev, converted by bench.locomo)
and a harder synthetic set of our own (bench.recall_sets). Summaries come from SUMMARIZER_MODEL when
set (any litellm model, SUMMARIZER_API_BASE optional), else from the offline extractive summarizer.

    .venv/bin/python -m bench.recall_quality [--sets locomo synthetic] [--modes verbatim hybrid] [--runs 3]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench._common import BenchDatabase, bench_database, bench_parser, bench_services, percentile
from bench.locomo import DEV_DIR, dev_dialogues
from bench.recall_sets import Dialogue, Question, synthetic_dialogue
from memory.llm import LLMClient
from memory.owners.personalities import PersonalityService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.embedders import Embedder
from memory.recall.index import VectorIndex
from memory.recall.local_embedder import LocalEmbedder
from memory.service import MemoryService, RecalledMemory
from memory.transfer.service import TransferService
from memory.transfer.transcript import read_transcript
from memory.types import MemoryMode, ModelConfig
from memory.wiring import MemoryServices

LIMIT = 10


@dataclass
class Scores:
    """Recall of a set of questions: overall, per category, words in the top LIMIT."""

    at5: list[float] = field(default_factory=list)
    at10: list[float] = field(default_factory=list)
    by_category: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    words: list[int] = field(default_factory=list)
    empty: int = 0  # questions that recalled nothing (the relevance floor)

    def add(self, question: Question, recalled: Sequence[RecalledMemory]) -> None:
        at5, at10 = evidence_recall(question, recalled, 5), evidence_recall(question, recalled, LIMIT)
        self.at5.append(at5)
        self.at10.append(at10)
        five, ten = self.by_category.setdefault(question.category, ([], []))
        five.append(at5)
        ten.append(at10)
        self.words.append(sum(len(m.text_with_context.split()) for m in recalled[:LIMIT]))
        self.empty += not recalled

    def merge(self, other: Scores) -> None:
        self.at5 += other.at5
        self.at10 += other.at10
        self.words += other.words
        self.empty += other.empty
        for category, (five, ten) in other.by_category.items():
            mine = self.by_category.setdefault(category, ([], []))
            mine[0].extend(five)
            mine[1].extend(ten)


def evidence_recall(question: Question, recalled: Sequence[RecalledMemory], k: int) -> float:
    """The share of the question's evidence messages among the sources of the top k memories."""
    found = {source for memory in recalled[:k] for source in memory.sources_with_context}
    return sum(e in found for e in question.evidence) / len(question.evidence)


def pct(values: Sequence[float]) -> str:
    return f"{100 * statistics.fmean(values):5.1f}" if values else "    -"


@dataclass
class ModeResult:
    scores: Scores
    latencies: list[list[float]]  # seconds, one list per run
    embedding: list[float]  # seconds to embed each query alone (first run), part of the latency


async def measure(
    service: MemoryService,
    embedder: Embedder,
    transfer: TransferService,
    personalities: PersonalityService,
    dialogue: Dialogue,
    mode: MemoryMode,
    workdir: Path,
    runs: int,
) -> ModeResult:
    """Import the dialogue as a transcript for a new personality in `mode`, then ask every question."""
    path = workdir / f"{dialogue.name}-{mode.value}.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in dialogue.lines) + "\n", encoding="utf-8")
    lines, skipped = read_transcript(path)
    personality, _ = await personalities.create(
        f"{dialogue.name}-{mode.value}", display_name=dialogue.personality_name, memory_mode=mode
    )
    await transfer.import_transcript(
        lines,
        personality=personality,
        default_user_id=dialogue.user_id,
        skipped_lines=skipped,
        mode=mode,
    )
    scores = Scores()
    latencies: list[list[float]] = []
    embedding = []
    for question in dialogue.questions:
        start = time.perf_counter()
        await embedder.embed([question.text])
        embedding.append(time.perf_counter() - start)
    for run in range(runs):
        took = []
        for question in dialogue.questions:
            start = time.perf_counter()
            recalled = await service.recall(
                personality_id=personality.id, user_id=dialogue.user_id, query=question.text, limit=LIMIT
            )
            took.append(time.perf_counter() - start)
            if run == 0:
                scores.add(question, recalled)
        latencies.append(took)
    return ModeResult(scores, latencies, embedding)


def summarizer_config() -> ModelConfig | None:
    """SUMMARIZER_MODEL (and SUMMARIZER_API_BASE) when set; None: the offline extractive summarizer."""
    model = os.environ.get("SUMMARIZER_MODEL")
    return ModelConfig(model=model, api_base=os.environ.get("SUMMARIZER_API_BASE")) if model else None


def eval_services(
    db: BenchDatabase, index: VectorIndex, embedder: Embedder, cfg: ModelConfig | None
) -> MemoryServices:
    """The product's services as the evals measure them: summaries by `cfg` (None: extractive)."""
    return bench_services(
        db, index=index, embedder=embedder, llm=LLMClient(max_concurrency_per_provider=8), summarizer=cfg
    )


async def run(sets: Sequence[str], modes: Sequence[MemoryMode], runs: int, locomo_dir: Path) -> None:
    dialogues: dict[str, list[Dialogue]] = {}
    if "locomo" in sets:
        dialogues["locomo"] = dev_dialogues(locomo_dir)
        if not dialogues["locomo"]:
            raise SystemExit(f"no LoCoMo conversations (*.json) in {locomo_dir}: pass --locomo-dir")
    if "synthetic" in sets:
        dialogues["synthetic"] = [synthetic_dialogue()]
    cfg = summarizer_config()
    embedder: Embedder = LocalEmbedder()
    await embedder.embed(["warm up"])
    print(f"summarizer: {cfg.model if cfg else 'extractive (offline fallback)'}; limit {LIMIT}")
    for mode in modes:
        # A database per mode: a personality's name must read apart from every other's in one.
        async with bench_database(f"recall-quality-{mode.value}") as db:
            personalities = PersonalityService(db.sessionmaker)
            index = EdgeVectorIndex(db.workdir / f"qdrant-{mode.value}")
            runtime = eval_services(db, index, embedder, cfg)
            service, transfer = runtime.memory, runtime.transfer
            for set_name, members in dialogues.items():
                total = Scores()
                latencies: list[list[float]] = [[] for _ in range(runs)]
                embedding: list[float] = []
                means = []
                for dialogue in members:
                    result = await measure(
                        service, embedder, transfer, personalities, dialogue, mode, db.workdir, runs
                    )
                    report(f"{set_name} {dialogue.name}", mode, result.scores, None)
                    total.merge(result.scores)
                    means.append((statistics.fmean(result.scores.at5), statistics.fmean(result.scores.at10)))
                    embedding += result.embedding
                    for mine, theirs in zip(latencies, result.latencies, strict=True):
                        mine.extend(theirs)
                report(f"{set_name} ALL", mode, total, latencies)
                print(
                    f"   of which query embedding (alone): p50 {1000 * statistics.median(embedding):.1f} ms, "
                    f"p95 {1000 * percentile(embedding, 0.95):.1f} ms"
                )
                if len(members) > 1:
                    at5, at10 = (100 * statistics.fmean(side) for side in zip(*means, strict=True))
                    print(f"   mean of the {len(members)} dialogues: r@5 {at5:.1f}  r@10 {at10:.1f}")
            await index.close()


def report(title: str, mode: MemoryMode, scores: Scores, latencies: list[list[float]] | None) -> None:
    """One block: overall and per-category recall@5/@10, words in the top 10, latency over runs."""
    print(f"\n== {title} | mode {mode.value} | {len(scores.at10)} questions")
    print(f"   {'category':<16} {'n':>4} {'r@5':>6} {'r@10':>6}")
    for category in sorted(scores.by_category):
        five, ten = scores.by_category[category]
        print(f"   {category:<16} {len(ten):>4} {pct(five):>6} {pct(ten):>6}")
    print(f"   {'ALL':<16} {len(scores.at10):>4} {pct(scores.at5):>6} {pct(scores.at10):>6}")
    if scores.words:
        print(
            f"   words in top {LIMIT}: mean {statistics.fmean(scores.words):.0f}, max {max(scores.words)}; "
            f"{scores.empty} questions recalled nothing"
        )
    if latencies:
        p50s = [1000 * statistics.median(run) for run in latencies]
        p95s = [1000 * percentile(run, 0.95) for run in latencies]
        print(
            f"   recall latency over {len(latencies)} runs: p50 median {statistics.median(p50s):.1f} ms "
            f"(min {min(p50s):.1f}, max {max(p50s):.1f}); p95 median {statistics.median(p95s):.1f} ms "
            f"(min {min(p95s):.1f}, max {max(p95s):.1f})"
        )


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--sets", nargs="+", choices=("locomo", "synthetic"), default=["locomo", "synthetic"])
    parser.add_argument(
        "--modes", nargs="+", choices=[m.value for m in MemoryMode], default=[m.value for m in MemoryMode]
    )
    parser.add_argument("--runs", type=int, default=3, help="passes over the questions, for latency")
    parser.add_argument("--locomo-dir", type=Path, default=DEV_DIR)
    parser.add_argument(
        "--without",
        nargs="*",
        default=[],
        help="levers to switch off, to measure each: neighbours, names, date, previous, blend, weights, "
        "answer-kind, floor, own-lines, context-of-three",
    )
    args = parser.parse_args()
    if args.without:
        from bench.recall_levers import switch_off  # only for ablations: it replaces product functions

        switch_off(args.without)
        print(f"without: {', '.join(args.without)}")
    asyncio.run(run(args.sets, [MemoryMode(m) for m in args.modes], args.runs, args.locomo_dir))


if __name__ == "__main__":
    main()
