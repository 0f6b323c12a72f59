"""No repeats (issue 21): near-duplicates among what recall returns, on a chat that says things again.

A chat is generated from bench/data/repeats.json (fixed seed): a user tells Sage the same facts over
SESSIONS sessions a few days apart, each time in other words (four wordings a fact), among greetings
and small talk, in their DM and, every third session, in a guild channel; late sessions change four
facts (a new job, a new book). Each user line gets a short reply. It is imported as `personae import`
does, and every fact's question is asked from the DM (`MemoryService.recall`, limit 10, as
`personae recall`).

Scored from the message ids alone: each memory is labelled with the facts its user lines state; a
memory in the top 10 is a near-duplicate when every fact it states was already stated by a memory
ranked above it (its own words; then also counting the context a prompt gets with the hits). Also
printed: each question's fact found in the top 10 (recall@10), rows stored, and changes swallowed
into the old fact's memory (must stay 0). Printed first with the lever off (the code before this
issue: every exchange its own row, no one-of-each in recall), then on. The issue asks at most 5%.

With --new-conversations (issue 31) each session is imported apart, every DM session a new
conversation (as after `chat --new`): a repeat across conversations of the same venue reinforces too.

    .venv/bin/python -m bench.repeats [--mode summarized|verbatim|hybrid] [--sessions 12]
        [--new-conversations] [--now-only]
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from bench._common import bench_memory, bench_parser
from memory.conversations import Venue, set_conversation_aside
from memory.formation import forming
from memory.formation.repeats import Screened
from memory.recall import search
from memory.service import RecalledMemory
from memory.transfer.transcript import parse_transcript
from models import Memory

DATA = Path(__file__).parent / "data" / "repeats.json"
LIMIT = 10
SESSIONS = 12
FACTS_PER_SESSION = 7
SEED = 21


@dataclass
class Chat:
    records: list[dict[str, Any]]
    label: dict[str, str]  # user line id -> the fact (or small talk) it states
    questions: list[tuple[str, str]]  # (fact id, question)
    changes: dict[str, str]  # a change's fact id -> the fact it changes


def generate(data: dict[str, Any], sessions: int, seed: int = SEED) -> Chat:
    """The user's chat over `sessions` sessions (see the module docstring)."""
    rng = random.Random(seed)
    facts = {f["id"]: f for f in data["facts"]}
    changes = {c["id"]: c for c in data["changes"]}
    records: list[dict[str, Any]] = []
    label: dict[str, str] = {}
    user = data["user"]
    replies = iter(rng.choice(data["replies"]) for _ in range(10**6))
    for session in range(sessions):
        venue = {"guild_id": "g1", "channel_id": "c1"} if session % 3 == 2 else {}
        said: list[tuple[str, str]] = [
            (f["id"], rng.choice(f["says"])) for f in rng.sample(data["filler"], 2)
        ]
        said += [(i, rng.choice(facts[i]["says"])) for i in rng.sample(sorted(facts), FACTS_PER_SESSION)]
        if session >= sessions * 2 // 3:  # the late sessions bring the changes, then say them again
            said += [(c["id"], rng.choice(c["says"])) for c in changes.values() if rng.random() < 0.6]
        rng.shuffle(said)
        for n, (fact, text) in enumerate(said):
            line_id = f"s{session:02d}-{n:02d}"
            at = f"2025-02-{1 + 2 * session:02d}T18:{2 * n:02d}:00Z"
            records.append(
                {
                    "id": line_id,
                    "role": "user",
                    "content": text,
                    "timestamp": at,
                    "user_id": user["id"],
                    "author": user["name"],
                    **venue,
                }
            )
            records.append(
                {
                    "id": f"{line_id}-r",
                    "role": "assistant",
                    "content": next(replies),
                    "timestamp": at,
                    "reply_to": line_id,
                    **venue,
                }
            )
            label[line_id] = fact
    questions = [(f["id"], f["question"]) for f in data["facts"]] + [
        (c["id"], c["question"]) for c in data["changes"]
    ]
    return Chat(records, label, questions, {c["id"]: c["of"] for c in data["changes"]})


@dataclass
class Figures:
    hits: int = 0
    duplicates: int = 0
    held: int = 0  # hits and their context: what a prompt holds
    held_duplicates: int = 0
    found: int = 0
    questions: int = 0
    rows: int = 0
    swallowed: int = 0
    examples: list[str] = field(default_factory=list)


def facts_of(sources: Sequence[str], label: dict[str, str]) -> frozenset[str]:
    return frozenset(label[s] for s in sources if s in label)


def count_duplicates(memories: Sequence[frozenset[str]]) -> int:
    """Memories (in rank order) each of whose facts an earlier one already states."""
    seen: set[str] = set()
    duplicates = 0
    for facts in memories:
        if facts and facts <= seen:
            duplicates += 1
        seen |= facts
    return duplicates


def _prompt_memories(recalled: Sequence[RecalledMemory], label: dict[str, str]) -> list[frozenset[str]]:
    held = []
    for m in recalled:
        held.append(facts_of(m.source_message_ids, label))
        held.extend(facts_of(c.source_message_ids, label) for c in m.context)
    return held


@contextmanager
def lever_off() -> Iterator[None]:
    """The code before issue 21: every exchange its own row, recall ranking by score and recency only
    (no near-duplicates left out either: issue 31)."""

    async def keep_all(store: Any, conversation: Any, formed: Any, rows: Any, vectors: Any) -> Screened:
        return Screened(rows=list(rows), vectors=list(vectors), formed=list(formed))

    def as_ranked(ranked: Any, vectors: Any, names: Any = ()) -> list[Any]:
        return list(ranked)

    def all_of_them(ranked: Any, *_: Any) -> list[Any]:
        return list(ranked)

    def by_score_and_recency(read: Any, scores: Any) -> list[Any]:
        return sorted(read, key=lambda m: (-scores.get(m.id, 0.0), -m.occurred_at.timestamp(), m.id))

    with ExitStack() as stack:
        for module, name, value in (
            (forming, "screen_batch", keep_all),
            (search, "one_of_each", list),
            (search, "restatements_last", as_ranked),
            (search, "without_near_duplicates", all_of_them),
            (search, "by_score", by_score_and_recency),
        ):
            original = getattr(module, name)
            setattr(module, name, value)
            stack.callback(setattr, module, name, original)
        yield


async def measure(chat: Chat, mode: str, *, new_conversations: bool = False) -> Figures:
    figures = Figures()
    async with bench_memory("repeats") as bench:
        sage, _ = await bench.personalities.create("Sage", memory_mode=mode)
        user = chat.records[0]["user_id"]
        # One import, or (issue 31) one per session, each DM session a new conversation (`chat --new`).
        sessions: dict[str, list[dict[str, Any]]] = {}
        for record in chat.records:
            sessions.setdefault(record["id"][:3] if new_conversations else "", []).append(record)
        for records in sessions.values():
            if new_conversations:
                async with bench.db.sessionmaker.begin() as session:
                    await set_conversation_aside(
                        session, sage.id, Venue(guild_id=None, channel_id=None, user_id=user)
                    )
            lines, skipped = parse_transcript("\n".join(json.dumps(r) for r in records))
            assert not skipped
            await bench.services.transfer.import_transcript(lines, personality=sage, default_user_id=None)
        async with bench.db.sessionmaker() as session:
            figures.rows = int(
                await session.scalar(
                    select(func.count()).select_from(Memory).where(Memory.state != "deleted")
                )
                or 0
            )
            for sources in (await session.scalars(select(Memory.source_message_ids))).all():
                stated = facts_of(sources, chat.label)
                figures.swallowed += sum(
                    1 for c, old in chat.changes.items() if c in stated and old in stated
                )
        for fact, question in chat.questions:
            recalled = await bench.service.recall(
                personality_id=sage.id, user_id=user, query=question, limit=LIMIT
            )
            hits = [facts_of(m.source_message_ids, chat.label) for m in recalled]
            duplicates = count_duplicates(hits)
            figures.hits += len(hits)
            figures.duplicates += duplicates
            held = _prompt_memories(recalled, chat.label)
            figures.held += len(held)
            figures.held_duplicates += count_duplicates(held)
            figures.questions += 1
            figures.found += any(fact in h for h in hits)
            if duplicates:
                shown = ", ".join("+".join(sorted(h)) or "-" for h in hits)
                figures.examples.append(
                    f"{question!r}: {duplicates} of {len(hits)} repeat one above: {shown}"
                )
    return figures


def report(title: str, f: Figures, verbose: bool) -> None:
    print(f"\n{title}")
    share = 100 * f.duplicates / max(1, f.hits)
    print(f"  near-duplicates in the top {LIMIT}: {f.duplicates} of {f.hits} ({share:.1f}%)")
    print(
        f"  with the context a prompt gets: {f.held_duplicates} of {f.held} "
        f"({100 * f.held_duplicates / max(1, f.held):.1f}%)"
    )
    print(f"  the question's fact in the top {LIMIT}: {f.found} of {f.questions}")
    print(f"  memories stored: {f.rows}; changes swallowed into the old fact's memory: {f.swallowed}")
    for example in f.examples if verbose else f.examples[:5]:
        print(f"    {example}")


async def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--mode", default="summarized", choices=["summarized", "verbatim", "hybrid"])
    parser.add_argument("--sessions", type=int, default=SESSIONS)
    parser.add_argument(
        "--new-conversations", action="store_true", help="each DM session a new conversation (issue 31)"
    )
    parser.add_argument("--now-only", action="store_true", help="skip the figure with the lever off")
    parser.add_argument("-v", "--verbose", action="store_true", help="every question with near-duplicates")
    args = parser.parse_args()
    chat = generate(json.loads(DATA.read_text()), args.sessions)
    said = sum(1 for r in chat.records if r["role"] == "user")
    print(
        f"A generated chat: {args.sessions} sessions, {said} user lines ({len(chat.questions)} facts and "
        f"changes, small talk), mode {args.mode}, recall limit {LIMIT}"
    )
    if not args.now_only:
        with lever_off():
            before = await measure(chat, args.mode, new_conversations=args.new_conversations)
        report("Before (every exchange its own row; recall by score and recency):", before, args.verbose)
    now = await measure(chat, args.mode, new_conversations=args.new_conversations)
    report("Now (repeats reinforce; recall keeps one of each):", now, args.verbose)


if __name__ == "__main__":
    asyncio.run(main())
