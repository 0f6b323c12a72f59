"""Workers: four `personae worker` processes over one backlog in the same PostgreSQL; each exchange
must be formed exactly once.

Qdrant Edge (and qdrant-client's local mode) is held by one process, so the workers cannot share one
local index: each runs with a data folder of its own, "formed once" is checked where formation is
recorded (PostgreSQL: memories, source messages, summarizer calls), and the deployment's index is then
built by one process, `personae reindex`, and checked for drift.
"""

from __future__ import annotations

import asyncio
import random
import re
import signal
import time

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import count_by, figures, request, run_command, stored_exchange
from bench.reliability_cases.lab import Lab
from testkit.llm_server import exchanges_asked

WORKERS = 4
FORMED_RE = re.compile(r"Formed (\d+) memories")


async def _seed_backlog(lab: Lab, conversations: int, per_conversation: int, rng: random.Random) -> int:
    """Exchanges stored through ChatService as the catch-up stores what it finds in a channel's history
    (the message, then the reply to it), none formed yet; returns how many."""
    async with lab.open_runtime(personae_data_dir=lab.workdir / "seed-data") as rt:
        personality, _ = await rt.personalities.create("Hive", memory_mode="summarized")

        async def talk(n: int) -> None:
            user = str(3000 + n)
            guild = "9001" if n % 2 else None
            channel = f"77{n}" if guild else None
            for i in range(per_conversation):
                text = (
                    f"Hive, item {n}-{i}: I moved the {rng.choice(['red', 'blue', 'green'])} boxes to shelf "
                    f"{i * 13 % 97} in the storage room on Tuesday, and the inventory count is now "
                    f"{n * 100 + i}; please keep this in mind for the audit next month."
                )
                req = request(personality.id, user, text, guild_id=guild, channel_id=channel)
                await stored_exchange(rt.chat, req, f"Noted, item {n}-{i}: shelf {i * 13 % 97}.")

        await asyncio.gather(*(talk(n) for n in range(conversations)))
    return conversations * per_conversation


@case(
    "workers",
    "four-workers-one-backlog",
    did=f"a backlog of exchanges stored through ChatService (DMs and guild channels, summarized mode); "
    f"{WORKERS} `personae worker` processes on the same PostgreSQL, each with its own Edge index folder, "
    "until nothing is pending; then `personae reindex` and `reindex --check` on the deployment's folder",
    expected="each exchange formed once: one memory per exchange, no message in two memories, each "
    "exchange summarized once (several share a call); the rebuilt index has 0 drift",
)
async def four_workers(lab: Lab, scale: Scale) -> Outcome:
    rng = random.Random(scale.seed)
    conversations = scale.pick(6, 40)
    exchanges = await _seed_backlog(lab, conversations, scale.pick(5, 20), rng)
    lab.llm.requests.clear()  # from here on, only the workers' calls
    workers = [
        await lab.spawn("worker", personae_data_dir=lab.workdir / f"worker-{i}") for i in range(WORKERS)
    ]
    started = time.perf_counter()
    deadline = started + scale.pick(120, 600)
    while await lab.pending_messages() and time.perf_counter() < deadline:  # noqa: ASYNC110 (polls the database)
        await asyncio.sleep(0.5)
    drained = time.perf_counter() - started
    await asyncio.sleep(1.0)  # a pass that just formed its batch indexes it before we stop
    logs = []
    for worker in workers:
        if worker.returncode is None:
            worker.send_signal(signal.SIGINT)
        _, err = await worker.communicate()
        logs.append(err.decode(errors="replace"))
    formed_by = [sum(int(n) for n in FORMED_RE.findall(log)) for log in logs]
    crashed = sum("Traceback (most recent call last)" in log for log in logs)

    memories = await lab.memories()
    sources = count_by(i for m in memories for i in m["source_message_ids"])
    in_two = sum(1 for n in sources.values() if n > 1)
    user_messages = int(await lab.scalar("SELECT count(*) FROM messages WHERE role = 'user'"))
    missing = user_messages - sum(
        1
        for m in await lab.rows("SELECT external_id FROM messages WHERE role = 'user'")
        if m["external_id"] in sources
    )
    summarizer_calls = sum(1 for r in lab.llm.requests if "messages" in r)
    summarized = sum(len(exchanges_asked(r)) for r in lab.llm.requests if "messages" in r)
    pending = await lab.pending_messages()

    async with lab.open_runtime() as rt:  # the deployment's own data folder: one process builds the index
        rebuilt, rebuilt_out, rebuilt_err = await run_command(rt, "reindex")
        _, checked, _ = await run_command(rt, "reindex", "--check")
    ok = (
        len(memories) == exchanges
        and in_two == 0
        and missing == 0
        and summarized == exchanges
        and pending == 0
        and crashed == 0
        and rebuilt == 0
        and "no drift" in checked
    )
    return check(
        ok,
        f"{len(memories)} memories of {exchanges} exchanges, {in_two} messages in two memories, {missing} "
        f"user messages in none, {summarized} exchanges summarized in {summarizer_calls} calls, {pending} "
        f"pending, {crashed} workers "
        f"crashed; reindex: {(rebuilt_out.strip() or rebuilt_err)[:80]}; "
        f"check: {(checked.strip().splitlines() or [''])[-1]}",
        figures(
            exchanges=exchanges,
            formed_per_worker="/".join(str(n) for n in formed_by),
            drained_s=f"{drained:.1f}",
            peak_summarizer_calls=lab.llm.max_in_flight,
        ),
    )
