"""Crash: `personae import` killed with SIGKILL at random points, restarted, and finished; its memories
must equal a clean import's, row for row, and its index must hold exactly them."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import figures, run_command
from bench.reliability_cases.lab import MEMORIES_SQL, Lab, prepare_database, rows_at
from models.database import create_engine

USERS = ("1001", "1002", "1003", "1004")
GUILD, CHANNEL = "8001", "6001"
COMPARED = ("id", "personality_id", "user_id", "guild_id", "is_dm", "content", "content_verbatim", "state")


def write_transcript(path: Path, exchanges: int, rng: random.Random) -> None:
    """Exchanges of four users, in their DMs and in one guild channel, each reply naming what it answers."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(exchanges):
            user = rng.choice(USERS)
            venue = {"guild_id": GUILD, "channel_id": CHANNEL} if i % 3 == 0 else {}
            ask = (
                f"Sage, entry {i}: my plant number {i * 7 % 997} needs water every {i % 9 + 2} days and "
                f"I keep forgetting it when I travel to Porto for work, which happens about twice a month."
            )
            answer = f"Then set a reminder for plant {i * 7 % 997} every {i % 9 + 2} days, entry {i}."
            common = {"timestamp": f"2025-01-01T00:00:{i % 60:02d}Z", **venue}
            out.write(
                json.dumps({"id": f"u{i}", "role": "user", "content": ask, "user_id": user, **common}) + "\n"
            )
            reply = {"id": f"a{i}", "role": "assistant", "content": answer, "reply_to": f"u{i}", **common}
            out.write(json.dumps(reply) + "\n")


def _key(memory: Mapping[str, Any]) -> tuple[Any, ...]:
    return (*(memory[c] for c in COMPARED), tuple(memory["source_message_ids"]))


def _import_argv(transcript: Path) -> tuple[str, ...]:
    return ("import", str(transcript), "--personality", "sage", "--mode", "summarized")


async def _import(lab: Lab, transcript: Path, **env: Any) -> asyncio.subprocess.Process:
    return await lab.spawn(*_import_argv(transcript), **env)


async def _prepared_database(lab: Lab, name: str) -> dict[str, Any]:
    """A fresh database with the personality, and its own data folder: one deployment."""
    url = await lab.cluster.create_database(f"{lab.name.replace('-', '_')}_{name}")
    await prepare_database(url, "sage")
    return {"database_url": url, "personae_data_dir": lab.workdir / f"data-{name}"}


async def _pending_share(url: str) -> float:
    [row] = await rows_at(
        url, "SELECT count(*) AS n, count(*) FILTER (WHERE memory_processed_at IS NULL) AS p FROM messages"
    )
    return 1.0 if not row["n"] else row["p"] / row["n"]


async def _kill_when_formed(process: asyncio.subprocess.Process, url: str, target: int) -> int | None:
    """SIGKILL the import once the database holds `target` memories (polled every 20 ms): the memories
    there just after the kill, or None when the run ended first."""
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as connection:
            while True:
                formed = (await connection.execute(text("SELECT count(*) FROM memories"))).scalar_one()
                await connection.commit()  # no transaction of ours stays open while the import writes
                if formed >= target:
                    os.killpg(process.pid, signal.SIGKILL)
                    await process.communicate()
                    after = (await connection.execute(text("SELECT count(*) FROM memories"))).scalar_one()
                    return int(after)
                try:
                    await asyncio.wait_for(process.wait(), 0.02)
                except TimeoutError:
                    continue
                await process.communicate()
                return None
    finally:
        await engine.dispose()


@case(
    "crash",
    "sigkill-during-import",
    did="`personae import --mode summarized` of N exchanges (4 users, DMs and a guild channel) killed "
    "with SIGKILL at random moments, restarted after each kill, then a finishing run; per trial a "
    "fresh database and data folder",
    expected="after the finishing run the memories equal a clean import's row for row (ids, owners, "
    "venues, contents, source ids, states); `reindex --check` finds no drift",
)
async def sigkill_import(lab: Lab, scale: Scale) -> Outcome:
    # Quick: the clean import and the finishing run are in this process (the killed runs are the
    # processes) and each kill waits until its run has formed a random share of what is left, so
    # every SIGKILL lands mid-import; full: every run a process, killed after a random delay within
    # the time a clean import takes.
    exchanges = scale.pick(40, 5000)
    trials = scale.pick(1, 2)
    kills_per_trial = scale.pick(2, 10)
    rng = random.Random(scale.seed)
    transcript = lab.workdir / "transcript.jsonl"
    write_transcript(transcript, exchanges, rng)

    clean_env = await _prepared_database(lab, "clean")
    started = time.perf_counter()
    if scale.quick:
        clean_run = await lab.command(scale, *_import_argv(transcript), **clean_env)
        code, clean_said = clean_run.code, clean_run.err
    else:
        process = await _import(lab, transcript, **clean_env)
        _, clean_err = await process.communicate()
        code, clean_said = process.returncode or 0, clean_err.decode()
    clean_seconds = time.perf_counter() - started
    if code != 0:
        return check(False, f"the clean import failed: {clean_said[-300:]}")
    clean = {m["id"]: _key(m) for m in await rows_at(clean_env["database_url"], MEMORIES_SQL)}
    startup = min(3.0, clean_seconds / 3)

    kills = 0
    mid_import = 0  # kills after this run formed a memory and before the import had formed them all
    mismatched: list[str] = []
    drift_found = 0
    rows_different = 0
    failed_restarts = 0
    for trial in range(trials):
        env = await _prepared_database(lab, f"trial{trial}")
        for _ in range(kills_per_trial):
            if scale.quick:
                [before] = await rows_at(env["database_url"], "SELECT count(*) AS n FROM memories")
                formed = int(before["n"])
                target = rng.randint(formed + 1, formed + max(1, (len(clean) - formed) // 2))
                process = await _import(lab, transcript, **env)
                after = await _kill_when_formed(process, env["database_url"], target)
                if after is None:
                    failed_restarts += process.returncode != 0
                else:
                    kills += 1
                    mid_import += formed < after < len(clean)
                continue
            share = await _pending_share(env["database_url"])
            delay = rng.uniform(0.3, startup + max(share, 0.05) * (clean_seconds - startup))
            process = await _import(lab, transcript, **env)
            try:
                await asyncio.wait_for(process.wait(), delay)
            except TimeoutError:
                os.killpg(process.pid, signal.SIGKILL)
                kills += 1
            else:
                failed_restarts += process.returncode != 0
            await process.communicate()
        finishing = await lab.command(scale, *_import_argv(transcript), **env)
        failed_restarts += finishing.code != 0
        got = {m["id"]: _key(m) for m in await rows_at(env["database_url"], MEMORIES_SQL)}
        if got != clean:
            missing = len(clean.keys() - got.keys())
            extra = len(got.keys() - clean.keys())
            differ = sum(1 for i in clean.keys() & got.keys() if clean[i] != got[i])
            rows_different += missing + extra + differ
            mismatched.append(f"trial {trial}: {missing} rows missing, {extra} extra, {differ} differ")
        async with lab.open_runtime(**env) as rt:
            code, out, _ = await run_command(rt, "reindex", "--check")
        drift_found += code != 0 or "no drift" not in out
    landed = mid_import == trials * kills_per_trial if scale.quick else kills > 0
    ok = not mismatched and not drift_found and not failed_restarts and landed
    return check(
        ok,
        f"{kills} SIGKILLs over {trials} trial(s)"
        + (f" ({mid_import} mid-import)" if scale.quick else "")
        + "; after finishing: "
        + ("; ".join(mismatched) if mismatched else f"all {len(clean)} memories equal the clean run's")
        + f"; drift in {drift_found} trial(s); {failed_restarts} restarts failed",
        figures(
            exchanges=exchanges,
            kills=kills,
            memories=len(clean),
            clean_import_s=f"{clean_seconds:.0f}",
            rows_different=rows_different,
        ),
    )
