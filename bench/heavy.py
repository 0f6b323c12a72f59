"""The suite's benchmark-sized cases, run by a command of their own rather than by `scripts/test`.

    .venv/bin/python -m bench.heavy            # at the scale the suite ran them, each asserted to hold
    .venv/bin/python -m bench.heavy --full     # at full scale (bench.reliability records every case so)

Imports of 100,000 lines and of 10,000 with the index built, four worker processes on one backlog, a
whole account exported and imported, randomized recall across users, and an import cut by a database
restart (a PostgreSQL of the case's own): minutes each on two cores, where the suite's other cases take
seconds. What only a real process shows stays in the suite at a small scale: `personae import` killed
with SIGKILL and restarted (crash/sigkill-during-import), a restart under a chat turn
(database/restart-during-chat-turn), the worker stopping on SIGTERM (tests/test_cli.py), imports of
small transcripts through the command (tests/test_import_cli.py). A transcript dated year one is here
too, as the suite checks it in-process (tests/test_poison.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench._common import bench_parser
from bench.reliability import run_cases
from bench.reliability_cases import Case, Scale, all_cases
from bench.reliability_cases.runner import format_table

HEAVY = frozenset(
    {
        "large-imports/bounded-memory",
        "large-imports/formation-rate",
        "workers/four-workers-one-backlog",
        "round-trips/whole-account-export",
        "isolation/randomized-recall-and-export",
        "database/restart-during-import",
        # Not big, but checked twice: tests/test_poison.py's year-one test runs the same commands
        # in-process and checks more of what they say, in a fifth of the five processes' time here.
        "poison/year-one-transcript",
    }
)


def heavy_cases(only: str | None = None) -> list[Case]:
    return [case for case in all_cases() if case.id in HEAVY and (only is None or only in case.id)]


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--full", action="store_true", help="full scale instead of the suite's")
    parser.add_argument("--only", help="run only cases whose id contains this text")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = asyncio.run(run_cases(heavy_cases(args.only), Scale(quick=not args.full)))
    print(format_table(rows))
    print(f"{len(rows)} cases in {(time.perf_counter() - start) / 60:.1f} minutes")
    sys.exit(0 if rows and all(row.outcome.ok for row in rows) else 1)


if __name__ == "__main__":
    main()
