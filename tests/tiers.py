"""Each test's tier, read from what it needs, and what keeps a test from waiting forever.

Tiers, cheapest first (docs/TESTING.md): `pure` (no database), `database` (the test PostgreSQL),
`model` (the local embedding model), `runtime` (personae's whole runtime: database, index, model, the
LLM test server), `process` (real `personae` processes, or servers of its own). A test is marked
with the highest tier it needs, read from its fixtures and its module, so new tests are marked without
anyone remembering to; `scripts/test --quick` runs the first three.
"""

from __future__ import annotations

import faulthandler
import inspect
import os
import sys
import threading
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

TIERS = ("pure", "database", "model", "runtime", "process")
QUICK = ("pure", "database", "model")

# Generous: a timeout catches a hang, not a slow test. A test may set its own with @pytest.mark.timeout.
TIMEOUTS = {"pure": 60, "database": 120, "model": 120, "runtime": 180, "process": 300}
# What a test may overrun its timeout by before its worker is ended (see pytest_runtest_protocol).
BACKSTOP_SECONDS = 60

_NEEDS = {
    "process": {"lab_pool", "embedded_data_dir"},
    "runtime": {"runtime", "runtime_without_chat_model", "cli_env"},
    "model": {"embedder"},
    "database": {"engine", "database_url", "run_cluster", "scratch_database_url", "empty_database_url"},
}


@cache
def _module_tier(module: ModuleType) -> str:
    """What a test module's own code needs: other processes (`subprocess`,
    `asyncio.create_subprocess_exec`), or personae's runtime opened by its CLI in-process."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return "pure"
    if "subprocess" in source or any("subprocess" in _source(helper) for helper in _test_helpers(module)):
        return "process"
    return "runtime" if "from bot.cli import main" in source else "pure"


def _test_helpers(module: ModuleType) -> Iterable[object]:
    """The functions and classes a test module imports from another test module (`personae` of
    tests/test_chat_cli.py, which starts `personae` processes; `Terminal`...)."""
    for value in vars(module).values():
        owner = getattr(value, "__module__", None)
        from_tests = isinstance(owner, str) and owner.startswith("tests.") and owner != module.__name__
        if from_tests and (inspect.isfunction(value) or inspect.isclass(value)):
            yield value


def _source(value: object) -> str:
    try:
        return inspect.getsource(value)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return ""


def tier_of(fixtures: Iterable[str], module: ModuleType | None) -> str:
    needed = set(fixtures)
    floor = _module_tier(module) if module is not None else "pure"
    for tier in ("process", "runtime", "model", "database"):
        if tier == floor:
            return tier
        if needed & _NEEDS[tier]:
            return tier
    return "pure"


def mark_tiers(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its tier and that tier's timeout (unless the test sets its own), then put
    the modules of the costliest tiers first (`order_by_cost`)."""
    tiers: dict[str, str] = {}
    for item in items:
        tier = tier_of(getattr(item, "fixturenames", ()), getattr(item, "module", None))
        tiers[item.nodeid] = tier
        item.add_marker(getattr(pytest.mark, tier))
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIMEOUTS[tier]))
    order_by_cost(items, tiers)


def order_by_cost(items: list[pytest.Item], tiers: dict[str, str]) -> None:
    """Modules whose costliest test is of a higher tier run first, each module's tests kept together
    and in order: pytest-xdist hands out tests in this order (groups first, the largest first), so the
    minute-long process tests start while there is other work for the second core, and the run ends
    on a trail of short ones instead of one core idle beside a long CLI test."""
    rank: dict[Path, int] = {}
    for item in items:
        key = item.path
        rank[key] = max(rank.get(key, 0), TIERS.index(tiers[item.nodeid]))
    items.sort(key=lambda item: -rank[item.path])  # stable: the order within a tier stays pytest's


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """pytest-timeout's timer fires once, in the main thread: a test that timed out in its call tears
    down with no timer at all, and its Failed, raised inside an asyncio callback, is only logged. A
    test still running BACKSTOP_SECONDS past its timeout, teardown included, ends its worker with the
    stacks of every thread; pytest-xdist reports the test as failed and starts another worker."""
    marker = item.get_closest_marker("timeout")
    seconds = marker.args[0] if marker is not None and marker.args else None
    if not seconds:
        yield
        return
    backstop = threading.Timer(seconds + BACKSTOP_SECONDS, _end_the_worker, (item.nodeid, seconds))
    backstop.daemon = True
    backstop.start()
    try:
        yield
    finally:
        backstop.cancel()


def _end_the_worker(nodeid: str, seconds: float) -> None:
    print(
        f"\n{nodeid} still running {BACKSTOP_SECONDS} s past its {seconds} s timeout; its threads:",
        file=sys.stderr,
        flush=True,
    )
    faulthandler.dump_traceback(all_threads=True)
    os._exit(1)


def register_markers(config: pytest.Config) -> None:
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: a test of the {tier} tier (tests/tiers.py)")
