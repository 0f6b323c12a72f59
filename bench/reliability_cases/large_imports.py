"""Large imports: `personae import` (a subprocess, as a user runs it) of transcripts of short lines, each
size into a personality and an index of its own; its memory is read from /proc/PID/status while it
runs, its progress from PostgreSQL.

What is measured: the peak of the process's memory (VmHWM) and of its private part (RssAnon: the heap,
not the index's segments mapped from disk), how long until it first committed (its first chunk:
before chunks, the whole file), and formation's rate (exchanges remembered per second from then).
Memory is judged on a personality that remembers nothing (formation reads and marks every exchange
but builds no index, whose own growth is not the import's); the rate on one that remembers every
exchange verbatim.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import figures
from bench.reliability_cases.lab import Lab

COLORS = ("red", "blue", "green", "amber", "violet", "teal", "ochre")
MIB = 1024


def write_short_lines(path: Path, lines: int) -> None:
    """`lines` short lines (about 78 bytes each), one user's exchanges in one DM, each reply after
    the line it answers; written as generated, never held."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(lines // 2):
            color = COLORS[i % len(COLORS)]
            out.write(
                json.dumps(
                    {
                        "id": f"u{i}",
                        "role": "user",
                        "content": f"the {color} key opens box {i}",
                        "user_id": "7",
                    }
                )
                + "\n"
            )
            out.write(json.dumps({"id": f"a{i}", "role": "assistant", "content": f"box {i}: {color}"}) + "\n")


def _status(pid: int) -> dict[str, int]:
    """VmHWM and RssAnon of a live process, in KiB ({} once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":", 1) for line in status)
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return {key: int(fields[key].split()[0]) for key in ("VmHWM", "RssAnon") if key in fields}


@dataclass
class Run:
    lines: int
    code: int
    said: str
    peak_kib: int
    peak_private_kib: int
    store_s: float
    form_s: float
    exchanges: int
    messages: int
    memories: int
    pending: int
    # (seconds since the commit, memories formed) every few seconds while it forms (remembering only).
    progress: list[tuple[float, int]]

    @property
    def rate(self) -> float:
        return self.exchanges / self.form_s if self.form_s > 0 else 0.0

    def rate_between(self, start: float, end: float) -> float:
        """Exchanges/s while formation went from `start` to `end` of its exchanges (shares, 0 to 1)."""
        points = [(0.0, 0), *self.progress, (self.form_s, self.memories)]
        first = next(p for p in points if p[1] >= start * self.exchanges)
        last = next(p for p in points if p[1] >= end * self.exchanges)
        return (last[1] - first[1]) / (last[0] - first[0]) if last[0] > first[0] else 0.0


async def import_and_watch(lab: Lab, lines: int, *, remember: bool) -> Run:
    """Create a personality, write the transcript, run `personae import` and watch it (see the module)."""
    name = f"big-{lines}-{'on' if remember else 'off'}"
    personality_id = await _committed(
        "INSERT INTO personalities (name, display_name, memory_enabled, memory_mode) "
        "VALUES (:name, :name, :on, 'verbatim') RETURNING id",
        lab,
        name=name,
        on=remember,
    )
    path = lab.workdir / f"{name}.jsonl"
    await asyncio.to_thread(write_short_lines, path, lines)
    data_dir = lab.workdir / f"data-{name}"
    start = time.perf_counter()
    process = await lab.spawn("import", str(path), "--personality", name, personae_data_dir=data_dir)
    peak = peak_private = 0
    stored_at: float | None = None
    progress: list[tuple[float, int]] = []
    polls = 0
    communicate = asyncio.ensure_future(process.communicate())
    while not communicate.done():
        now = _status(process.pid)
        peak = max(peak, now.get("VmHWM", 0))
        peak_private = max(peak_private, now.get("RssAnon", 0))
        if stored_at is None and polls % 4 == 0:  # its first chunk committed: the conversation shows
            seen = await lab.scalar(
                "SELECT count(*) FROM conversations WHERE personality_id = :p", p=personality_id
            )
            if seen:
                stored_at = time.perf_counter()
        elif stored_at is not None and remember and polls % 20 == 0:
            formed = await lab.scalar(
                "SELECT count(*) FROM memories WHERE personality_id = :p", p=personality_id
            )
            progress.append((time.perf_counter() - stored_at, int(formed)))
        polls += 1
        await asyncio.wait([communicate], timeout=0.25)
    out, err = communicate.result()
    end = time.perf_counter()
    stored_at = stored_at or end
    [written] = await lab.rows(
        "SELECT (SELECT count(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE c.personality_id = :p) AS messages, "
        "(SELECT count(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE c.personality_id = :p AND m.memory_processed_at IS NULL) AS pending, "
        "(SELECT count(*) FROM memories WHERE personality_id = :p) AS memories",
        p=personality_id,
    )
    # Its rows go with it: the next size starts from a database of the same size.
    await _committed("DELETE FROM personalities WHERE id = :p RETURNING id", lab, p=personality_id)
    path.unlink()
    said = (err.decode(errors="replace").strip().splitlines() or [""])[-1]
    return Run(
        lines,
        process.returncode or 0,
        said[said.find("personae:") :] if "personae:" in said else out.decode().strip().replace("\n", " / "),
        peak,
        peak_private,
        stored_at - start,
        end - stored_at,
        lines // 2,
        int(written["messages"]),
        int(written["memories"]),
        int(written["pending"]),
        progress,
    )


async def _committed(sql: str, lab: Lab, **params: Any) -> Any:
    async with lab.engine.begin() as connection:
        return (await connection.execute(text(sql), params)).scalar()


def _mib(kib: int) -> str:
    return f"{kib / MIB:.0f} MiB"


def _happened(runs: list[Run], remember: bool) -> str:
    return "; ".join(
        f"{r.lines:,} lines: exit {r.code}, {r.messages:,} messages, {r.memories:,} memories, "
        f"{r.pending} pending, peak {_mib(r.peak_kib)} (private {_mib(r.peak_private_kib)}), stored in "
        f"{r.store_s:.0f} s"
        + (
            f", formed at {r.rate:.0f} exchanges/s ({r.rate_between(0, 0.2):.0f} over its first fifth, "
            f"{r.rate_between(0.8, 1):.0f} over its last)"
            if remember
            else ""
        )
        + ("" if r.code == 0 else f" ({r.said[:160]})")
        for r in runs
    )


def _complete(runs: list[Run], remember: bool) -> bool:
    return all(
        r.code == 0
        and r.messages == r.lines
        and r.pending == 0
        and r.memories == (r.exchanges if remember else 0)
        for r in runs
    )


@case(
    "large-imports",
    "bounded-memory",
    did="`personae import` (a subprocess) of transcripts of short lines, one user's DM, into a personality "
    "that remembers nothing (formation reads and marks every exchange, builds no index): 5,000 and "
    "100,000 lines at the quick scale, 10,000, 100,000 and 1,000,000 at full scale; peak memory read "
    "from /proc while it runs",
    expected="every line stored once, every exchange done, nothing pending; the peak private memory "
    "(RssAnon) does not grow with the file: the largest within 64 MiB of the smallest",
)
async def bounded_memory(lab: Lab, scale: Scale) -> Outcome:
    sizes = (5_000, 100_000) if scale.quick else (10_000, 100_000, 1_000_000)
    runs = [await import_and_watch(lab, lines, remember=False) for lines in sizes]
    flat = runs[-1].peak_private_kib <= runs[0].peak_private_kib + 64 * MIB
    return check(
        _complete(runs, False) and flat,
        _happened(runs, False),
        figures(
            peak_private_mib="/".join(f"{r.peak_private_kib / MIB:.0f}" for r in runs),
            peak_mib="/".join(f"{r.peak_kib / MIB:.0f}" for r in runs),
            first_commit_s="/".join(f"{r.store_s:.0f}" for r in runs),
        ),
    )


@case(
    "large-imports",
    "formation-rate",
    did="`personae import` (a subprocess) of transcripts of short lines, one user's DM, remembered verbatim "
    "(embeddings from the LLM test server, the index built): 2,000 and 10,000 lines at the quick scale, "
    "10,000, 100,000 and 1,000,000 at full scale; formation timed from the commit of the messages to "
    "the end",
    expected="every exchange remembered once, nothing pending; at full scale formation of the largest "
    "within 2x of the rate of the smallest (the quick scale times nothing)",
)
async def formation_rate(lab: Lab, scale: Scale) -> Outcome:
    sizes = (2_000, 10_000) if scale.quick else (10_000, 100_000, 1_000_000)
    runs = [await import_and_watch(lab, lines, remember=True) for lines in sizes]
    steady = scale.quick or runs[-1].rate * 2 >= runs[0].rate
    return check(
        _complete(runs, True) and steady,
        _happened(runs, True),
        figures(
            exchanges_per_s="/".join(f"{r.rate:.0f}" for r in runs),
            peak_private_mib="/".join(f"{r.peak_private_kib / MIB:.0f}" for r in runs),
            peak_mib="/".join(f"{r.peak_kib / MIB:.0f}" for r in runs),
        ),
    )
