"""The vector index alone: its size on disk, the memory a process holding it uses, and search latency.

A Qdrant Edge index of `--points` memories of `--users` users (random unit dense vectors, real keyword
vectors of bench.recall's synthetic texts) is written through the product's EdgeVectorIndex and
optimized, then closed. A fresh child process opens it as the bot does and asks `--searches`
filtered searches (a random user each, one dense and one keyword query, 60 candidates a side, as a
recall does), printing its resident memory (private and file-backed: the index's segments are
mapped from disk) when loaded and after the searches, and the search latency. Each `--runs` is a
fresh child on the same index. Run it on two checkouts to compare index layouts (the index's
configuration is the product's, not a setting of this bench).

    .venv/bin/python -m bench.index_memory [--points 100000] [--users 1000] [--searches 300] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from bench._common import bench_parser, load_average, percentile, spread
from bench.recall import QUERIES, memory_text
from bench.rss import memory_status
from memory.recall.edge import EdgeVectorIndex
from memory.recall.keywords import encode_sparse, encode_sparse_query
from memory.types import IndexPoint, MemoryPayload, RecallFilter

DIMENSION = 384  # the local embedder's
BATCH = 5000
CANDIDATES = 60  # memory.recall.search.CANDIDATES


async def build(path: Path, points: int, users: int) -> None:
    index = EdgeVectorIndex(path)
    await index.ensure_collection(DIMENSION)
    rng, np_rng = random.Random(points), np.random.default_rng(points)
    for offset in range(0, points, BATCH):
        n = min(BATCH, points - offset)
        vectors = np_rng.standard_normal((n, DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batch = [
            IndexPoint(
                uuid.uuid5(uuid.NAMESPACE_OID, f"bench-{offset + i}"),
                vectors[i].tolist(),
                encode_sparse(memory_text(rng)),
                MemoryPayload(1, f"user{(offset + i) % users}", "g1", "c1", False, float(offset + i)),
            )
            for i in range(n)
        ]
        await index.upsert(batch)
    await index.optimize()
    await index.close()


async def probe(path: Path, users: int, searches: int) -> dict[str, object]:
    """In the child: open the index, search, and report memory and latency as JSON."""
    index = EdgeVectorIndex(path)
    await index.ensure_collection(DIMENSION)
    loaded = memory_status()
    rng, np_rng = random.Random(2), np.random.default_rng(2)
    seconds = []
    for _ in range(searches):
        query = np_rng.standard_normal(DIMENSION).astype(np.float32)
        query /= np.linalg.norm(query)
        flt = RecallFilter(1, f"user{rng.randrange(users)}", "g1", False)
        started = time.perf_counter()
        await index.search(
            dense=query.tolist(), sparse=encode_sparse_query(rng.choice(QUERIES)), flt=flt, limit=CANDIDATES
        )
        seconds.append(time.perf_counter() - started)
    return {"loaded": loaded, "searched": memory_status(), "seconds": seconds}


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)  # the child's side
    args = parser.parse_args()
    if args.probe is not None:
        print(json.dumps(asyncio.run(probe(args.probe, args.users, args.searches))))
        return
    with tempfile.TemporaryDirectory(prefix="personae-index-") as tmp:
        path = Path(tmp) / "qdrant"
        started = time.perf_counter()
        asyncio.run(build(path, args.points, args.users))
        disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20
        print(
            f"{args.points:,} points of {args.users:,} users written and optimized in "
            f"{time.perf_counter() - started:.0f} s; {disk:,.0f} MB on disk; load average {load_average()}"
        )
        runs = []
        for _ in range(args.runs):
            command = [sys.executable, "-m", "bench.index_memory", "--probe", str(path)]
            command += ["--users", str(args.users), "--searches", str(args.searches)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for stage in ("loaded", "searched"):
        rss = [run[stage]["VmRSS"] for run in runs]
        files = [run[stage]["RssFile"] for run in runs]
        print(f"  RSS {stage:>8}: {spread(rss, 0)} MB, of which file-backed {spread(files, 0)} MB")
    for share in (0.5, 0.95):
        ms = [1000 * percentile(run["seconds"], share) for run in runs]
        print(f"  search p{round(share * 100)}: {spread(ms, 2)} ms")
    print(f"  {args.runs} fresh processes of {args.searches} searches each; load average {load_average()}")


if __name__ == "__main__":
    main()
