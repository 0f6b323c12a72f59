"""Running cases into rows, and the rows as the printed table and as docs/RELIABILITY.md.

Shared by `python -m bench.reliability` and tests/reliability, so both run a case the same way: in its
area's lab, any exception turned into a FAIL row that names it.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.reliability_cases import Case, Outcome, Scale
from bench.reliability_cases.lab import LabPool

# How each area's lab is opened (keyword arguments of open_lab); areas not listed get the defaults.
AREA_OPTIONS: Mapping[str, Mapping[str, Any]] = {
    # Short timeouts so that stalls are timeouts; one retry, as the settings allow.
    "faults": {"llm_timeout": 1.5, "llm_max_retries": 1},
    "discord": {"llm_timeout": 1.5, "llm_max_retries": 1},
    # Cases that start and stop processes and servers of their own.
    "crash": {"runtime": False},
    "database": {"runtime": False},
    "index": {"runtime": False},
    "poison": {"runtime": False},
    "workers": {"runtime": False},
    "large-imports": {"runtime": False},
}


@dataclass(frozen=True, slots=True)
class Row:
    case: Case
    outcome: Outcome
    seconds: float
    detail: str = ""  # the traceback, when the case itself raised

    @property
    def verdict(self) -> str:
        return "PASS" if self.outcome.ok else "FAIL"


async def run_case(pool: LabPool, case: Case, scale: Scale) -> Row:
    start = time.perf_counter()
    try:
        lab = await pool.get(case.area)
        outcome = await case.run(lab, scale)
        detail = ""
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        outcome = Outcome(f"raised {type(exc).__name__}: {first[:300]}", ok=False)
        detail = traceback.format_exc()
    return Row(case, outcome, time.perf_counter() - start, detail)


def _cell(value: str, width: int) -> str:
    value = " ".join(value.split())
    return value if len(value) <= width else value[: width - 1] + "…"


def format_table(rows: Sequence[Row]) -> str:
    """The rows as a plain-text table for the terminal (long cells cut; the markdown has them whole)."""
    widths = (30, 44, 44, 56, 4, 40)
    head = ("case", "what was done", "expected", "what happened", "", "figures")
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    for row in rows:
        cells = (
            row.case.id,
            row.case.did,
            row.case.expected,
            row.outcome.happened,
            row.verdict,
            row.outcome.figures,
        )
        lines.append("  ".join(_cell(c, w).ljust(w) for c, w in zip(cells, widths, strict=True)))
    passed = sum(row.outcome.ok for row in rows)
    lines.append(f"{passed} of {len(rows)} cases PASS, {len(rows) - passed} FAIL")
    return "\n".join(lines)


def _md(value: str) -> str:
    return " ".join(value.split()).replace("|", "\\|")


def markdown(rows: Sequence[Row], *, conditions: str, intro: str) -> str:
    """docs/RELIABILITY.md: the introduction, the run's conditions, then one table row per case."""
    passed = sum(row.outcome.ok for row in rows)
    out = [intro.rstrip(), "", "## The last run", "", conditions.rstrip(), ""]
    out.append(f"**{passed} of {len(rows)} cases PASS, {len(rows) - passed} FAIL.**")
    out.append("")
    out.append("| family | cases | PASS | time (s) |")
    out.append("| --- | --- | --- | --- |")
    families: dict[str, list[Row]] = {}
    for row in rows:
        families.setdefault(row.case.area, []).append(row)
    for area, family in families.items():
        seconds = sum(r.seconds for r in family)
        out.append(f"| {area} | {len(family)} | {sum(r.outcome.ok for r in family)} | {seconds:.0f} |")
    out.append("")
    out.append("| case | what was done | expected | what happened | result | figures |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        cells = (
            f"`{row.case.id}`",
            row.case.did,
            row.case.expected,
            row.outcome.happened,
            f"**{row.verdict}**",
            row.outcome.figures,
        )
        out.append("| " + " | ".join(_md(c) for c in cells) + " |")
    return "\n".join(out) + "\n"
