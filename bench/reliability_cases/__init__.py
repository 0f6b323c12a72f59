"""The reliability suite's cases: each a small async function that does one thing to personae and says
what happened, as one row of the table `python -m bench.reliability` prints.

A case is registered with `@case(area, name, did=..., expected=...)` and gets the area's `Lab` (a fresh
database, a data folder, the LLM test server, personae's runtime on them) and the `Scale`. It returns an
`Outcome`: what happened, whether that is what was expected, and the figures measured. The script runs
every case at full scale and records the figures; tests/reliability runs the same cases at the quick
scale and asserts each outcome, so the two can never disagree about what is checked.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.reliability_cases.lab import Lab

# Modules holding cases, in the order of the table.
CASE_MODULES = (
    "concurrency",
    "faults",
    "crash",
    "database",
    "index",
    "poison",
    "workers",
    "isolation",
    "bad_chat",
    "bad_transcripts",
    "bad_commands",
    "collisions",
    "round_trips",
    "import_faults",
    "large_imports",
    "discord_bot",
)


@dataclass(frozen=True, slots=True)
class Scale:
    """How big a run is: quick (CI-sized, what the tests run) or full (what the script records)."""

    quick: bool
    seed: int = 20261122

    def pick(self, quick: int, full: int) -> int:
        return quick if self.quick else full

    @property
    def label(self) -> str:
        return "quick" if self.quick else "full"


@dataclass(frozen=True, slots=True)
class Outcome:
    happened: str
    ok: bool
    figures: str = ""


CaseFn = Callable[["Lab", Scale], Awaitable[Outcome]]


@dataclass(frozen=True, slots=True)
class Case:
    area: str
    name: str
    did: str
    expected: str
    run: CaseFn

    @property
    def id(self) -> str:
        return f"{self.area}/{self.name}"


_REGISTRY: list[Case] = []


def case(area: str, name: str, *, did: str, expected: str) -> Callable[[CaseFn], CaseFn]:
    """Register the decorated function as the case `area/name`."""

    def register(fn: CaseFn) -> CaseFn:
        _REGISTRY.append(Case(area, name, did, expected, fn))
        return fn

    return register


def all_cases() -> list[Case]:
    """Every registered case, in the order of CASE_MODULES then of definition."""
    for module in CASE_MODULES:
        importlib.import_module(f"bench.reliability_cases.{module}")
    order = {name: i for i, name in enumerate(CASE_MODULES)}
    return sorted(_REGISTRY, key=lambda c: order[c.run.__module__.rsplit(".", 1)[1]])


def check(ok: bool, happened: str, figures: str = "") -> Outcome:
    return Outcome(happened=happened, ok=ok, figures=figures)
