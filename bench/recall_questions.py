"""Recall on our own question set: direct questions (the answer first), gathering questions (every
piece), unrelated questions (nothing at all), through the product's import and recall.

Chats, each imported as `personae import` does into a personality of its own per memory mode:
bench/data/eval_conversations.jsonl (three users with one personality), examples/lilith.jsonl and
examples/sage.jsonl (two users each), bench/data/seraphina_sillytavern.jsonl (a SillyTavern
roleplay, read by the product's SillyTavern reader, imported for user `kael`; its answers are named
`st#N`, the Nth message), and bench/data/brannoc_roleplay.jsonl (a tavern roleplay with *actions*,
written after the levers were chosen: held out), and bench/data/asked_first.jsonl (issue 31: facts
told, then asked about in exchanges of their own; Wren's replies hold the words of four unrelated
questions), and bench/data/juniper_heldout.jsonl (issue 31's third pass: everyday facts in a DM,
held out). Questions: bench/data/eval_questions.jsonl (direct,
over the eval chat) and bench/data/recall_questions.jsonl (direct, gathering, and unrelated ones
asked of every user).

Scores, every question asked through `MemoryService.recall` with limit 10:
- direct: the rank of the first memory whose own messages hold an answer (its context not counted);
  rank 1 and top 5 shares;
- gathering: the share of the answer messages among the top 10 memories' messages, context included
  (what a prompt gets), as LoCoMo is scored;
- unrelated: the share of recalls (every question, every user) that return nothing; and of the
  direct questions, the share that return anything (a floor must not silence them);
- words: the mean words recalled (own text and context) for the direct and gathering questions.

    .venv/bin/python -m bench.recall_questions [--modes verbatim summarized] [--misses] [--without floor]
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._common import bench_database, bench_parser
from bench.recall_quality import eval_services, summarizer_config
from memory.owners.personalities import PersonalityService
from memory.recall.edge import EdgeVectorIndex
from memory.recall.local_embedder import LocalEmbedder
from memory.service import MemoryService, RecalledMemory
from memory.transfer.service import TransferService
from memory.transfer.sillytavern import parse_sillytavern
from memory.transfer.transcript import TranscriptLine, read_transcript
from memory.types import MemoryMode

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
LIMIT = 10


@dataclass(frozen=True)
class Chat:
    name: str
    path: Path
    personality_name: str
    sillytavern_user: str | None = None  # the user a SillyTavern chat is imported for


CHATS = (
    Chat("eval", DATA / "eval_conversations.jsonl", "Mira"),
    Chat("lilith", ROOT / "examples" / "lilith.jsonl", "Lilith"),
    Chat("sage", ROOT / "examples" / "sage.jsonl", "Sage"),
    Chat("seraphina", DATA / "seraphina_sillytavern.jsonl", "Seraphina", sillytavern_user="kael"),
    # Written after the levers of issue 22 were chosen, to check them on a chat they were not tuned on.
    Chat("brannoc", DATA / "brannoc_roleplay.jsonl", "Brannoc"),
    # Issue 31: each fact told, then asked about in an exchange of its own (the question and its answer
    # in different memories), Wren's replies holding the words of the unrelated questions added then.
    Chat("asked", DATA / "asked_first.jsonl", "Wren"),
    # Issue 31's third pass: a DM chat of everyday facts over four days, written before any lever of
    # that pass was tried, to check them on a chat they were not tuned on (held out).
    Chat("juniper", DATA / "juniper_heldout.jsonl", "Juniper"),
)


@dataclass(frozen=True)
class Asked:
    chat: str
    user: str
    kind: str  # direct | gathering | unrelated
    query: str
    answers: tuple[str, ...]


def load_questions() -> list[Asked]:
    """Our questions: the eval chat's direct ones, then the rest (answers `st#N` resolved later)."""
    asked = [
        Asked("eval", q["user_id"], "direct", q["query"], tuple(q["answer_ids"]))
        for q in _jsonl(DATA / "eval_questions.jsonl")
    ]
    asked += [
        Asked(q["chat"], q["user"], q["kind"], q["query"], tuple(q["answers"]))
        for q in _jsonl(DATA / "recall_questions.jsonl")
    ]
    return asked


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def chat_lines(chat: Chat) -> tuple[list[TranscriptLine], int]:
    """The chat's transcript lines as `personae import` reads them (its --format too)."""
    if chat.sillytavern_user is None:
        return read_transcript(chat.path)
    parsed = parse_sillytavern(chat.path.read_text(encoding="utf-8"))
    return parsed.lines, parsed.skipped


@dataclass
class Scores:
    direct_ranks: list[int | None] = field(default_factory=list)  # None: not in the top LIMIT
    gathering: list[float] = field(default_factory=list)
    unrelated_empty: list[bool] = field(default_factory=list)
    words: list[int] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    chat_ranks: dict[str, list[int | None]] = field(default_factory=dict)  # direct ranks by chat

    def share_direct(self, within: int) -> float:
        return sum(r is not None and r <= within for r in self.direct_ranks) / len(self.direct_ranks)


def direct_rank(answers: Sequence[str], recalled: Sequence[RecalledMemory]) -> int | None:
    """The rank of the first memory whose own messages hold an answer."""
    return next(
        (rank for rank, m in enumerate(recalled, 1) if set(m.source_message_ids) & set(answers)), None
    )


def gathered(answers: Sequence[str], recalled: Sequence[RecalledMemory]) -> float:
    """The share of the answers among the messages recalled, context included."""
    found = {source for m in recalled for source in m.sources_with_context}
    return sum(a in found for a in answers) / len(answers)


async def score_mode(
    service: MemoryService,
    transfer: TransferService,
    personalities: PersonalityService,
    mode: MemoryMode,
    questions: list[Asked],
) -> Scores:
    scores = Scores()
    for chat in CHATS:
        lines, skipped = chat_lines(chat)
        personality, _ = await personalities.create(
            f"{chat.name}-{mode.value}", display_name=chat.personality_name, memory_mode=mode
        )
        await transfer.import_transcript(
            lines,
            personality=personality,
            default_user_id=chat.sillytavern_user,
            skipped_lines=skipped,
            mode=mode,
        )
        ordinal = {f"st#{n}": line.id for n, line in enumerate(lines, 1)}
        users = sorted({line.user_id or chat.sillytavern_user or "" for line in lines if line.role == "user"})

        async def ask(user: str, query: str, *, pid: int = personality.id) -> list[RecalledMemory]:
            return await service.recall(personality_id=pid, user_id=user, query=query, limit=LIMIT)

        for q in questions:
            if q.kind == "unrelated":
                for user in users:
                    scores.unrelated_empty.append(not await ask(user, q.query))
                    if not scores.unrelated_empty[-1]:
                        found = (await ask(user, q.query))[0]
                        scores.misses.append(f"unrelated {chat.name}/{user} {q.query!r}: {_brief(found)}")
                continue
            if q.chat != chat.name:
                continue
            answers = [ordinal.get(a, a) for a in q.answers]
            recalled = await ask(q.user, q.query)
            scores.words.append(sum(len(m.text_with_context.split()) for m in recalled))
            if q.kind == "direct":
                rank = direct_rank(answers, recalled)
                scores.direct_ranks.append(rank)
                scores.chat_ranks.setdefault(chat.name, []).append(rank)
                if rank != 1:
                    top = _brief(recalled[0]) if recalled else "nothing"
                    answer = f"; answer {_brief(recalled[rank - 1])}" if rank else ""
                    scores.misses.append(
                        f"direct {chat.name}/{q.user} {q.query!r}: rank {rank}; first {top}{answer}"
                    )
            else:
                share = gathered(answers, recalled)
                scores.gathering.append(share)
                if share < 1:
                    missing = [a for a in q.answers if ordinal.get(a, a) not in _sources(recalled)]
                    scores.misses.append(
                        f"gathering {chat.name}/{q.user} {q.query!r}: {share:.2f}, missing {missing}"
                    )
    return scores


def _sources(recalled: Sequence[RecalledMemory]) -> set[str]:
    return {s for m in recalled for s in m.sources_with_context}


def _brief(m: RecalledMemory) -> str:
    return f"{m.score:.2f} {' / '.join(m.content.splitlines())[:110]!r}"


async def run(modes: Sequence[MemoryMode], show_misses: bool) -> None:
    questions = load_questions()
    cfg = summarizer_config()
    embedder = LocalEmbedder()
    await embedder.embed(["warm up"])
    kinds = {k: sum(q.kind == k for q in questions) for k in ("direct", "gathering", "unrelated")}
    print(
        f"questions: {kinds['direct']} direct, {kinds['gathering']} gathering, "
        f"{kinds['unrelated']} unrelated (asked of every user); "
        f"summarizer: {cfg.model if cfg else 'extractive (offline fallback)'}"
    )
    print(
        f"{'mode':<11} {'direct rank 1':>13} {'top 5':>6} {'gathering r@10':>15} "
        f"{'unrelated empty':>16} {'related non-empty':>18} {'words':>6}"
    )
    for mode in modes:
        # A database per mode: a personality's name must read apart from every other's in one.
        async with bench_database(f"recall-questions-{mode.value}") as db:
            personalities = PersonalityService(db.sessionmaker)
            index = EdgeVectorIndex(db.workdir / f"qdrant-{mode.value}")
            try:
                services = eval_services(db, index, embedder, cfg)
                service, transfer = services.memory, services.transfer
                scores = await score_mode(service, transfer, personalities, mode, questions)
            finally:
                await index.close()
            related = sum(r is not None for r in scores.direct_ranks) / len(scores.direct_ranks)
            print(
                f"{mode.value:<11} {100 * scores.share_direct(1):>12.1f}% "
                f"{100 * scores.share_direct(5):>5.1f}% "
                f"{100 * statistics.fmean(scores.gathering):>14.1f}% "
                f"{100 * statistics.fmean(scores.unrelated_empty):>15.1f}% {100 * related:>17.1f}% "
                f"{statistics.fmean(scores.words):>6.0f}"
            )
            by_chat = (
                f"{name} {100 * sum(r == 1 for r in ranks) / len(ranks):.0f}% of {len(ranks)}"
                for name, ranks in scores.chat_ranks.items()
            )
            print(f"{'':<11} direct rank 1 by chat: {', '.join(by_chat)}")
            if show_misses:
                print("\n".join(f"   {miss}" for miss in scores.misses))


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--modes", nargs="+", choices=[m.value for m in MemoryMode], default=["verbatim", "summarized"]
    )
    parser.add_argument("--misses", action="store_true", help="list every question not fully answered")
    parser.add_argument("--without", nargs="*", default=[], help="levers to switch off (bench.recall_levers)")
    args = parser.parse_args()
    if args.without:
        from bench.recall_levers import switch_off  # only for ablations: it replaces product values

        switch_off(args.without)
        print(f"without: {', '.join(args.without)}")
    asyncio.run(run([MemoryMode(m) for m in args.modes], args.misses))


if __name__ == "__main__":
    main()
