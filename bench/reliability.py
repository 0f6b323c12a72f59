"""The reliability suite: personae itself (no special builds) under concurrency, LLM faults, crashes,
database restarts, a lost index, parallel workers, isolation and bad input, as a table of figures.

    .venv/bin/python -m bench.reliability [--quick] [--only TEXT] [--write docs/RELIABILITY.md]

Each case (bench/reliability_cases) runs personae's own code paths against a real PostgreSQL (an
embedded pgserver started for the run), the real Qdrant Edge index and the LLM over real HTTP
(testkit.llm_server). tests/reliability asserts every case's outcome at the quick scale; this script
runs them at full scale and records what happened, and the figures, in docs/RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench._common import bench_parser
from bench.reliability_cases import Case, Scale, all_cases
from bench.reliability_cases.lab import Cluster, LabPool
from bench.reliability_cases.runner import AREA_OPTIONS, Row, format_table, markdown, run_case
from models.database import start_embedded_postgres, stop_embedded_postgres
from testkit.processes import reset_signal_dispositions

CHECKOUT = str(Path(__file__).resolve().parents[1])

INTRO = """\
# Reliability

What personae promises, tried the hard way: a memory holds what *this* user said and what the
personality answered *them*; nothing is lost; nothing reaches anyone else. Each row below is one case of
`bench/reliability_cases`, run by

```
.venv/bin/python -m bench.reliability --write docs/RELIABILITY.md     # full scale, this file
.venv/bin/python -m bench.reliability --quick                         # the CI scale, printed only
```

Every case runs personae's own code paths (ChatService turns as the chat cog takes them, `personae
import`, `personae worker`, `personae reindex`, MemoryService, the services behind the slash commands)
against a real PostgreSQL (an embedded pgserver started for the run, one fresh database per area),
the real Qdrant Edge index, and the LLM over real HTTP (`testkit.llm_server`, which can stall, fail
with any status and `Retry-After`, drop the connection or say anything). Embeddings come from the same
test server (a deterministic hash, sized as `text-embedding-3-small`): these cases test who gets which
memory, not how well it matches. `tests/reliability` runs the same case functions at the quick scale and
asserts every outcome, so the tests and this table cannot disagree about what is checked; CI runs them.
Figures are what the run measured; times are wall-clock on a shared 2-core machine and only indicative.

How the harder cases are arranged:

- **Crash**: `personae import` of a transcript runs as a subprocess and is killed with SIGKILL after a
  random delay within the time a clean import takes; it is restarted (and killed again) several
  times per trial, then a finishing run completes it. The memories of every trial are compared with a
  clean import's into a separate database, row for row: ids, owners, contents, source message ids
  and states.
- **Database**: a PostgreSQL of the case's own (pgserver's binaries, its own data folder) is stopped
  with `pg_ctl stop -m fast` while an import runs in a subprocess, and while a chat turn waits on the
  model, then started again.
- **Workers**: Qdrant Edge is an in-process index held by one process (a file lock), and
  qdrant-client's local mode is one-process too, so no arrangement gives four processes one shared
  local index. What is done instead: four `personae worker` processes share the PostgreSQL and its
  backlog, each with an Edge index of its own (its own `PERSONAE_DATA_DIR`); they claim
  conversations with an advisory lock (skipped when held), and "formed once" is checked where it lives, in
  PostgreSQL (one memory per exchange, each exchange summarized once). The deployment's index is
  then built by one process, `personae reindex`, and checked with `personae reindex --check`.
  With a Qdrant server (`QDRANT_URL`) the workers would write the one index directly.
- **Large imports**: `personae import` runs as a subprocess on generated transcripts of short lines
  (10,000, 100,000 and 1,000,000 at full scale), each into a personality and an index of its own. Its
  memory is read from `/proc/PID/status` four times a second (VmHWM, and RssAnon: the private part,
  not the index's segments mapped from disk), the commit of its first chunk of messages (the whole
  file before imports committed 2,000 lines at a time) and its formation from PostgreSQL. Memory is
  judged on a personality that remembers nothing (formation still reads and marks every exchange, but
  builds no index, whose own growth is not the import's); formation's rate on one that remembers every
  exchange. The rates are wall-clock on the shared machine: indicative only.
- **Round trips**: a user's whole-account export (what `/memory export` sends) is written to a file
  and imported by `personae import` in a subprocess into a fresh database, then compared row for row.
- **Discord**: the shipped bot (`PersonaeBot` with its extensions) logs in to `testkit.fake_discord`, a
  real HTTP server and gateway on 127.0.0.1, on the area's runtime; users say things while it is away
  (in the channels' history, no event), Discord refuses requests as it does (a status and an error
  body), and what users would see is read back beside the log and the memories.
- **Poison** (issue 33): one bad input must not stop everyone. A transcript dated
  0001-01-01T00:00:00Z (which PostgreSQL's driver used to read back naive) is imported beside another
  personality's; `personae reindex` is SIGKILLed while its first embedding request is stalled by the
  model, and the old index must keep serving; a card with a 20,000-entry lorebook is imported (the
  first 1,000 kept) and a reply's lore work is timed as ChatService runs it, off the event loop.
"""


def start_cluster() -> tuple[Cluster, Path]:
    """An embedded PostgreSQL for the run, in a short world-traversable folder (pgserver may run it as
    another user, and its socket path must stay short)."""
    folder = Path(tempfile.mkdtemp(prefix="personae-rel-"))
    os.chmod(folder, 0o755)
    # Registered before pgserver registers its stop, so it runs after the server stopped (LIFO).
    atexit.register(shutil.rmtree, folder, True)
    url = start_embedded_postgres(folder, database="reliability")
    return Cluster(url), folder


async def run_cases(cases: list[Case], scale: Scale) -> list[Row]:
    """Run these cases one after another on a PostgreSQL of the run's own, stopped and removed at the end,
    each case's progress on stderr."""
    reset_signal_dispositions()  # the workers' cases stop their `personae worker`s with SIGINT
    # The cases' `personae` subprocesses run this checkout's code whatever their working directory.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [CHECKOUT, os.environ.get("PYTHONPATH")]))
    cluster, folder = await asyncio.to_thread(start_cluster)
    labs = folder / "labs"
    labs.mkdir()
    os.chmod(labs, 0o755)
    pool = LabPool(cluster, labs, AREA_OPTIONS)
    rows: list[Row] = []
    try:
        for case in cases:
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


def conditions(scale: Scale, rows: list[Row], seconds: float) -> str:
    return (
        f"Run on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {scale.label} scale, seed {scale.seed}: "
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} cores, {len(rows)} cases in {seconds / 60:.1f} minutes."
    )


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="the CI scale the tests run")
    parser.add_argument("--only", help="run only cases whose id contains this text")
    parser.add_argument("--seed", type=int, default=Scale(quick=True).seed)
    parser.add_argument("--write", type=Path, help="write the markdown table here (e.g. docs/RELIABILITY.md)")
    args = parser.parse_args()
    scale = Scale(quick=args.quick, seed=args.seed)
    start = time.perf_counter()
    rows = asyncio.run(run_cases([c for c in all_cases() if args.only is None or args.only in c.id], scale))
    elapsed = time.perf_counter() - start
    print(format_table(rows))
    if args.write:
        args.write.write_text(markdown(rows, conditions=conditions(scale, rows, elapsed), intro=INTRO))
        print(f"wrote {args.write}")
    sys.exit(0 if all(row.outcome.ok for row in rows) else 1)


if __name__ == "__main__":
    main()
