"""`bench.summaries --real`: the sets through a real small model, every stored memory audited.

SmolLM2-135M-Instruct on llama.cpp's server (testkit/real_model.py: one slot, 2 threads) summarizes
through the product's path (the transfer service, summarized mode, the defaults: LLM_TIMEOUT 60 s, 8
exchanges a call), for each set: the Sage demo (examples/sage.jsonl), LoCoMo dev conversation 26
sessions 1-4 (../shared/eval/locomo-dev, read in place) and a two-user channel
(bench/data/two_user_channel.jsonl). Then each memory is read against the transcript
(testkit/summary_audit.py) and the counts printed: memories written in the model's words, and those
holding another exchange's or another user's words, filed under the wrong user, cut mid-sentence,
carrying formatting or prompt tags, stating a fact their exchange does not hold, stating what was only
asked, or telling an event nobody said; why the others are not the model's; the saving as stored
beside the extractive summarizer's on the same set; and the LLM tokens (prompt and completion, as the
model server counts them: bench/llm_meter.py) per memory formed, with `--singles` also as a ratio to
the same set summarized one exchange a call.

    .venv/bin/python -m bench.summaries --real [--sets sage two-users locomo-26] [--locomo-sessions 4]
        [--singles] [--show] [--threads 1]
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bench._common import BenchDatabase, bench_database, bench_parser, bench_services
from bench.llm_meter import UsageMeter
from bench.locomo import DEV_DIR, dev_dialogues
from memory.llm import load_litellm
from memory.owners.personalities import PersonalityService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.local_embedder import LocalEmbedder
from memory.transfer.transcript import TranscriptLine
from memory.types import MemoryMode, ModelConfig
from models import Memory
from testkit.real_model import REAL_MODEL, THREADS, RealModelServer, missing_reason
from testkit.summary_audit import KINDS, audit_memories, stored_memories, transcript_lines

ROOT = Path(__file__).resolve().parent.parent
SAGE = ROOT / "examples" / "sage.jsonl"
TWO_USERS = ROOT / "bench" / "data" / "two_user_channel.jsonl"
SETS = ("sage", "two-users", "locomo-26")
_SESSION_RE = re.compile(r"^D(\d+):")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_set(name: str, locomo_dir: Path, sessions: int) -> tuple[str, list[dict[str, Any]]]:
    """A set's personality name and transcript records."""
    if name == "sage":
        return "Sage", _jsonl(SAGE)
    if name == "two-users":
        return "Sage", _jsonl(TWO_USERS)
    dialogue = next(d for d in dev_dialogues(locomo_dir) if d.name.endswith("26"))
    kept = [
        line
        for line in dialogue.lines
        if (m := _SESSION_RE.match(str(line["id"]))) is not None and int(m.group(1)) <= sessions
    ]
    return dialogue.personality_name, kept


async def form(
    db: BenchDatabase, embedder: LocalEmbedder, name: str, personality: str, lines: list[dict[str, Any]],
    cfg: ModelConfig | None, run_id: str, batch: int | None = None,
) -> list[Memory]:  # fmt: skip
    """Import the set into a fresh summarized personality through the product's importer."""
    index = EdgeVectorIndex(db.workdir / f"qdrant-{run_id}")
    services = bench_services(db, index=index, embedder=embedder, summarizer=cfg, summarizer_batch=batch)
    personalities = PersonalityService(db.sessionmaker)
    created, _ = await personalities.create(
        f"{name}-{run_id}", display_name=personality, memory_mode=MemoryMode.SUMMARIZED
    )
    records = [TranscriptLine.model_validate({**line, "line_no": i}) for i, line in enumerate(lines)]
    try:
        await services.transfer.import_transcript(
            records,
            personality=created,
            default_user_id=next(line["user_id"] for line in lines if line.get("user_id")),
        )
        async with db.sessionmaker() as session:
            found = await session.scalars(select(Memory).where(Memory.personality_id == created.id))
            memories = list(found.all())
        # Read out, the personality goes: the next run's of the same display name would read like it.
        await personalities.delete(created.name, actor=None)
    finally:
        await index.close()
    return memories


def saving(memories: list[Memory]) -> float:
    source = sum(m.source_chars for m in memories)
    stored = sum(len(m.content) for m in memories)
    return 100.0 * (1 - stored / source) if source else 0.0


async def run(
    sets: list[str], locomo_dir: Path, sessions: int, show: bool, singles: bool, threads: int
) -> None:
    reason = missing_reason()
    if reason is not None:
        raise SystemExit(reason)
    logging.getLogger("memory").setLevel(logging.ERROR)
    load_litellm()
    embedder = LocalEmbedder()
    await embedder.embed(["warm up"])
    print(f"Summaries by a real model ({REAL_MODEL}: SmolLM2-135M-Instruct Q4_1 on llama.cpp, 1 slot)")
    header = f"  {'set':<10} {'memories':>8} {'by model':>8} " + " ".join(f"{k:>13}" for k in KINDS)
    tokens = f" {'calls':>5} {'tokens/mem':>10}" + (f" {'x single':>8}" if singles else "")
    print(header + f" {'saving':>7} {'extractive':>10}{tokens}  not the model's")
    with RealModelServer(threads=threads) as server:
        async with bench_database("summaries-real") as db, UsageMeter(server.base_url) as meter:
            cfg = ModelConfig(model=REAL_MODEL, api_base=meter.base_url, api_key="none", timeout=60)
            for number, name in enumerate(sets):
                personality, lines = load_set(name, locomo_dir, sessions)
                baseline = await form(db, embedder, name, personality, lines, None, f"{number}x")
                meter.reset()
                found = await form(db, embedder, name, personality, lines, cfg, f"{number}m")
                per_memory = meter.tokens / len(found) if found else 0.0
                calls = meter.calls
                ratio = ""
                if singles:  # the same set, one exchange a call: what a batch is measured against
                    meter.reset()
                    alone = await form(db, embedder, name, personality, lines, cfg, f"{number}s", batch=1)
                    per_single = meter.tokens / len(alone) if alone else 0.0
                    ratio = f" {per_memory / per_single if per_single else 0.0:7.2f}x"
                audit = audit_memories(
                    stored_memories(found), transcript_lines(lines, personality), model=REAL_MODEL
                )
                why = Counter(m.summary_fallback or m.summarizer for m in found if m.summarizer != REAL_MODEL)
                counts = " ".join(f"{audit.counts[k]:>13}" for k in KINDS)
                print(
                    f"  {name:<10} {audit.memories:>8} {audit.by_model:>8} {counts} {saving(found):6.1f}% "
                    f"{saving(baseline):9.1f}% {calls:5d} {per_memory:10.0f}{ratio}  "
                    f"{', '.join(f'{n} {r}' for r, n in why.most_common()) or '-'}"
                )
                for finding in audit.findings if show else []:
                    print(f"    {finding}")


def main(argv: list[str] | None = None) -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--real", action="store_true", help="(what chose this module)")
    parser.add_argument("--sets", nargs="*", choices=SETS, default=list(SETS))
    parser.add_argument("--locomo-dir", type=Path, default=DEV_DIR)
    parser.add_argument("--locomo-sessions", type=int, default=4)
    parser.add_argument("--show", action="store_true", help="print each finding")
    parser.add_argument(
        "--singles", action="store_true", help="also one exchange a call, for the tokens' ratio to it"
    )
    parser.add_argument("--threads", type=int, default=THREADS, help="the model server's CPU threads")
    args = parser.parse_args(argv)
    asyncio.run(run(args.sets, args.locomo_dir, args.locomo_sessions, args.show, args.singles, args.threads))


if __name__ == "__main__":
    main()
