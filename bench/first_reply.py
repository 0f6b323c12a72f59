"""The first reply after a start against the tenth: `personae chat` started afresh for each run (a
real process, as a user starts it), ten messages typed as soon as its prompt is up, each timed from
the line sent to its reply's line on the screen (and the start itself, to the prompt). The chat model
is the LLM test server over HTTP on 127.0.0.1 (no latency of its own), so what is timed is ours: the
model client's loading, recall, the prompt. The issue's target: the first within 20 % of the tenth
(median of the runs).

    .venv/bin/python -m bench.first_reply --runs 5

Its own embedded PostgreSQL and data folder in a temporary directory, stopped at the end.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._common import bench_parser, spread
from testkit.llm_server import LLMTestServer

TURNS = 10
REPLY = "That is good to hear."
ROOT = Path(__file__).resolve().parents[1]


async def personae(*args: str, env: dict[str, str]) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", *args, env=env, cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    if process.returncode:
        raise SystemExit(f"personae {' '.join(args)} failed ({process.returncode})")
    return out.decode()


async def one_chat(env: dict[str, str], run: int) -> tuple[float, list[float]]:
    """A fresh `personae chat`: the seconds from its start to its prompt, and from each line typed to its
    reply's whole line."""
    launched = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bot.cli", "chat", "--personality", "sage", "--user", f"bench-{run}"),
        env=env,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    await process.stdout.readline()  # the banner: the chat is ready and the prompt is next
    start_up = time.perf_counter() - launched
    seconds = []
    for turn in range(TURNS):
        started = time.perf_counter()
        process.stdin.write(f"Message {turn + 1}: my garden has {turn + 3} roses.\n".encode())
        await process.stdin.drain()
        while REPLY not in (await process.stdout.readline()).decode():
            pass
        seconds.append(time.perf_counter() - started)
    process.stdin.write(b"/quit\n")
    await process.stdin.drain()
    process.stdin.close()
    await process.wait()
    return start_up, seconds


async def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--runs", type=int, default=5, help="chats started, each afresh (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="personae-first-reply-") as tmp:
        async with LLMTestServer(responder=lambda body: REPLY) as server:
            env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "QDRANT_URL")}
            env |= {
                "PERSONAE_DATA_DIR": str(Path(tmp) / "data"),
                "CHAT_MODEL": "openai/bench-chat",
                "CHAT_API_BASE": server.base_url,
                "PYTHONPATH": str(ROOT),
            }
            env.pop("SUMMARIZER_MODEL", None)
            try:
                await personae("personality", "create", "Sage", env=env)
                runs = [await one_chat(env, run) for run in range(args.runs)]
            finally:
                await personae("db", "stop", env=env)
    first = [r[0] for _, r in runs]
    tenth = [r[-1] for _, r in runs]
    print(f"runs: {args.runs}, {TURNS} messages each, seconds from the line typed to its reply")
    print(f"start to prompt:           {spread([s for s, _ in runs], 3)}")
    print(f"first reply after a start: {spread(first, 3)}")
    print(f"tenth reply:               {spread(tenth, 3)}")
    print(f"first / tenth (medians):   {statistics.median(first) / statistics.median(tenth):.2f}")


if __name__ == "__main__":
    asyncio.run(main())
