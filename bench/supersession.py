"""Supersession (issue 31): a correction retires every memory of the wrong claim, and only the user
brings it back. Run by `bench.corrections` after its own figures.

bench/data/supersession.jsonl holds 12 cases written by hand for issue 31 (four users; a name, a
place, a number, a date or a company changed). Each goes through the product's own path:

1. Imported as the user's DM chat with Sage (as `personae import`, dated 2025): the claim, two more
   lines that state its old value, and a question of the user answered by Sage with the old value
   (the personality restating it).
2. The claim's memory corrected (`personae memory correct`, "Wrong…").
3. The case's question asked (`MemoryService.recall`, limit 10): does a memory stating the old value
   (one of the four above) rank above the correction, or come at all?
4. Later (dated now): the user asks again and Sage answers with the old value once more; the question
   is asked again: does the old value come back?
5. Later still: the user states the old value again in their own words: is it remembered (a live
   memory, recalled for the question)?

Targets: superseded claims above the correction 0, brought back by the personality 0, the user's
restatement remembered every time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import any_, literal, select

from bench._common import BenchMemory
from memory.transfer.transcript import TranscriptLine, parse_transcript
from models import Memory, Personality

DATA = Path(__file__).parent / "data" / "supersession.jsonl"
LIMIT = 10
NOTED = "Noted, thank you."


@dataclass
class SupersessionFigures:
    cases: int = 0
    stated_before: int = 0  # memories stating the old value before the correction
    superseded: int = 0  # of them, superseded by the correction
    above_correction: int = 0  # questions where an old memory ranked above the correction
    correction_first: int = 0
    brought_back: int = 0  # the personality's later restatement live or recalled
    restated_remembered: int = 0  # the user's later restatement live and recalled
    misses: list[str] = field(default_factory=list)


def read_cases(path: Path = DATA) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def chat(case: dict[str, Any], turns: Sequence[tuple[str, str, str]], at: datetime) -> list[TranscriptLine]:
    """(line id, user's text, Sage's reply) turns as the user's DM chat, a minute apart from `at`."""
    records: list[dict[str, Any]] = []
    for n, (line_id, text, reply) in enumerate(turns):
        stamp = (at + timedelta(minutes=n)).isoformat().replace("+00:00", "Z")
        records.append(
            {
                "id": line_id,
                "role": "user",
                "content": text,
                "timestamp": stamp,
                "user_id": case["user_id"],
                "author": case["user_name"],
            }
        )
        records.append({"id": f"{line_id}-r", "role": "assistant", "content": reply, "timestamp": stamp})
    lines, skipped = parse_transcript("\n".join(json.dumps(r) for r in records))
    assert not skipped
    return lines


async def _memories_of(bench: BenchMemory, line_ids: Sequence[str]) -> list[Memory]:
    async with bench.db.sessionmaker() as session:
        found: list[Memory] = []
        for line_id in line_ids:
            of_line = literal(line_id) == any_(Memory.source_message_ids)
            found += (await session.scalars(select(Memory).where(of_line, Memory.state != "deleted"))).all()
        return found


async def measure_supersession(
    bench: BenchMemory, sage: Personality, cases: Sequence[dict[str, Any]]
) -> SupersessionFigures:
    figures = SupersessionFigures()
    transfer = bench.services.transfer

    async def imported(case: dict[str, Any], turns: Sequence[tuple[str, str, str]], at: datetime) -> None:
        await transfer.import_transcript(chat(case, turns, at), personality=sage, default_user_id=None)

    async def ranked(case: dict[str, Any]) -> list[Any]:
        return await bench.service.recall(
            personality_id=sage.id, user_id=case["user_id"], query=case["question"], limit=LIMIT
        )

    then = datetime(2025, 3, 1, tzinfo=UTC)
    for n, case in enumerate(cases):
        c = case["id"]
        stating = [f"{c}-claim", f"{c}-s0", f"{c}-s1", f"{c}-asked"]
        await imported(
            case,
            [
                (stating[0], case["claim"], NOTED),
                (stating[1], case["spread"][0], NOTED),
                (stating[2], case["spread"][1], NOTED),
                (stating[3], case["asked"], case["reply"]),
            ],
            then + timedelta(hours=n),
        )
    for case in cases:
        c = case["id"]
        figures.cases += 1
        [claim] = await _memories_of(bench, [f"{c}-claim"])
        await bench.service.correct(user_id=case["user_id"], memory_id=claim.id, content=case["correction"])
        # A summarized memory may hold two exchanges, the claim's and the next: corrected, it holds
        # the correction now, and is no memory of the old value (4 of the 36 counted as such before).
        old = [m for m in await _memories_of(bench, [f"{c}-s0", f"{c}-s1", f"{c}-asked"]) if m.id != claim.id]
        figures.stated_before += len(old)
        figures.superseded += sum(m.superseded_at is not None for m in old)
        figures.misses += [f"{c}: {m.content!r} not superseded" for m in old if m.superseded_at is None]
        old_ids = {m.id for m in old}
        found = await ranked(case)
        ids = [m.id for m in found]
        first_old = next(
            (i for i, m in enumerate(found) if m.id in old_ids or old_ids & {x.id for x in m.context}), None
        )
        at_correction = ids.index(claim.id) if claim.id in ids else None
        if first_old is not None and (at_correction is None or first_old < at_correction):
            figures.above_correction += 1
            figures.misses.append(f"{c}: an old memory above the correction for {case['question']!r}")
        figures.correction_first += at_correction == 0

    now = datetime.now(UTC) + timedelta(minutes=1)
    for n, case in enumerate(cases):
        c = case["id"]
        await imported(case, [(f"{c}-again", case["asked"], case["reply"])], now + timedelta(minutes=2 * n))
        [again] = await _memories_of(bench, [f"{c}-again"])
        recalled = {s for m in await ranked(case) for s in m.sources_with_context}
        if again.superseded_at is None or f"{c}-again" in recalled:
            figures.brought_back += 1
            figures.misses.append(f"{c}: Sage saying {case['old']!r} again brought it back")

    later = now + timedelta(hours=1)
    for n, case in enumerate(cases):
        c = case["id"]
        await imported(case, [(f"{c}-later", case["later"], NOTED)], later + timedelta(minutes=2 * n))
        restated = await _memories_of(bench, [f"{c}-later"])
        recalled = {s for m in await ranked(case) for s in m.sources_with_context}
        if restated and restated[0].superseded_at is None and f"{c}-later" in recalled:
            figures.restated_remembered += 1
        else:
            figures.misses.append(f"{c}: the user's {case['later']!r} not remembered")
    return figures


def report_supersession(f: SupersessionFigures, verbose: bool) -> None:
    print(f"\nSupersession ({f.cases} corrected claims, bench/data/supersession.jsonl):")
    print(
        f"  memories stating the old value superseded by the correction: {f.superseded} of {f.stated_before}"
    )
    print(
        f"  questions where a superseded memory ranks above the correction: {f.above_correction} of {f.cases}"
    )
    print(f"  the correction first: {f.correction_first} of {f.cases}")
    print(f"  the personality restating the old value brings it back: {f.brought_back} of {f.cases}")
    print(f"  the user restating it later remembered: {f.restated_remembered} of {f.cases}")
    for miss in f.misses if verbose else f.misses[:5]:
        print(f"    {miss}")
