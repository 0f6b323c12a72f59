"""The suite's benchmark-sized cases, run by a command of their own rather than by `scripts/test`.

    .venv/bin/python -m bench.heavy            # at the scale the suite ran them, each asserted to hold
    .venv/bin/python -m bench.heavy --full     # at full scale (bench.reliability records every case so)

Imports of 100,000 lines and of 10,000 with the index built, four worker processes on one backlog, a
whole account exported and imported, randomized recall across users, and an import cut by a database
restart (a PostgreSQL of the case's own): minutes each on two cores, where the suite's other cases take
seconds. What only a real process shows stays in the suite at a small scale: `personae import` killed
with SIGKILL and restarted (crash/sigkill-during-import), a restart under a chat turn
(database/restart-during-chat-turn), the worker stopping on SIGTERM (tests/test_cli.py), imports of
small transcripts through the command (tests/test_import_cli.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench._common import bench_parser
from bench.reliability import start_cluster
from bench.reliability_cases import Case, Scale, all_cases
from bench.reliability_cases.lab import LabPool
from bench.reliability_cases.runner import AREA_OPTIONS, Row, format_table, run_case
from models.database import stop_embedded_postgres
from testkit.processes import reset_signal_dispositions

HEAVY = frozenset(
    {
        "large-imports/bounded-memory",
        "large-imports/formation-rate",
        "workers/four-workers-one-backlog",
        "round-trips/whole-account-export",
        "isolation/randomized-recall-and-export",
        "database/restart-during-import",
    }
)


def heavy_cases(only: str | None = None) -> list[Case]:
    return [case for case in all_cases() if case.id in HEAVY and (only is None or only in case.id)]


async def run(scale: Scale, only: str | None) -> list[Row]:
    cluster, folder = await asyncio.to_thread(start_cluster)
    root = folder / "labs"
    root.mkdir()
    os.chmod(root, 0o755)
    pool = LabPool(cluster, root, AREA_OPTIONS)
    rows: list[Row] = []
    try:
        for case in heavy_cases(only):
            print(f"... {case.id}", file=sys.stderr, flush=True)
            row = await run_case(pool, case, scale)
            rows.append(row)
            print(f"    {row.verdict} in {row.seconds:.1f} s: {row.outcome.happened}", file=sys.stderr)
            if row.detail:
                print(row.detail, file=sys.stderr)
    finally:
        await pool.aclose()
        await asyncio.to_thread(stop_embedded_postgres, folder)
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--full", action="store_true", help="full scale instead of the suite's")
    parser.add_argument("--only", help="run only cases whose id contains this text")
    args = parser.parse_args()
    reset_signal_dispositions()  # the workers case stops its `personae worker`s with SIGINT
    # Its `personae` subprocesses run this checkout's code whatever their working directory.
    root = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    start = time.perf_counter()
    rows = asyncio.run(run(Scale(quick=not args.full), args.only))
    print(format_table(rows))
    print(f"{len(rows)} cases in {(time.perf_counter() - start) / 60:.1f} minutes")
    sys.exit(0 if rows and all(row.outcome.ok for row in rows) else 1)


if __name__ == "__main__":
    main()
