"""The reliability suite's cases (bench/reliability_cases) at the quick scale, each asserted to hold.

`python -m bench.reliability` runs the same case functions at full scale and records the figures in
docs/RELIABILITY.md; here each case is one test, its outcome the assertion, so what CI checks and what
the table reports are one and the same code. Cases of an area share the area's lab (a database of its
own in the session's PostgreSQL, a data folder, the LLM servers, personae's runtime on them; conftest.py).
"""

from __future__ import annotations

import pytest

from bench.heavy import HEAVY
from bench.reliability_cases import Case, Scale, all_cases
from bench.reliability_cases.lab import LabPool
from bench.reliability_cases.runner import run_case

# The benchmark-sized ones run by `python -m bench.heavy` instead (minutes each; see there).
CASES = [case for case in all_cases() if case.id not in HEAVY]
QUICK = Scale(quick=True)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_case_holds(case: Case, lab_pool: LabPool) -> None:
    row = await run_case(lab_pool, case, QUICK)
    assert row.outcome.ok, (
        f"{case.id}: {case.did}\nexpected: {case.expected}\nhappened: {row.outcome.happened}\n{row.detail}"
    )


def test_the_cases_moved_to_bench_heavy_exist() -> None:
    assert {c.id for c in all_cases()} >= HEAVY


def test_there_are_at_least_forty_bad_input_cases() -> None:
    bad = [c for c in CASES if c.area.startswith("bad-")]
    assert len(bad) >= 40, len(bad)
