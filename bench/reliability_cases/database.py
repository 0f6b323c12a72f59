"""Database: the embedded PostgreSQL stopped and started again during an import and during a chat turn.

Each case runs a PostgreSQL of its own (pgserver's binaries and `pg_ctl`, its own data folder), so
stopping it disturbs nothing else.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import chat_turn, figures, request, snowflake
from bench.reliability_cases.crash import write_transcript
from bench.reliability_cases.lab import Lab, prepare_database, rows_at
from models.database import start_embedded_postgres
from testkit.llm_server import Stall


class OwnPostgres:
    """An embedded PostgreSQL this case may stop (`pg_ctl stop -m fast`) and start again."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.url = start_embedded_postgres(folder, database="personae")
        from pgserver.postgres_server import get_server

        self.server = get_server((folder / "postgres").resolve(), cleanup_mode="stop")
        self.stops = 0

    def stop(self) -> None:
        from pgserver import _commands

        # Made at import, one function per binary pgserver ships.
        pg_ctl: Any = _commands.pg_ctl  # type: ignore[attr-defined]
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)
        self.stops += 1

    def start(self) -> None:
        self.server.ensure_postgres_running()

    def close(self) -> None:
        self.server.cleanup()


@asynccontextmanager
async def own_postgres() -> AsyncIterator[OwnPostgres]:
    # Short and world-traversable: pgserver runs the server as another user when we are root.
    folder = Path(tempfile.mkdtemp(prefix="personae-pgstop-"))
    os.chmod(folder, 0o755)
    server = await asyncio.to_thread(OwnPostgres, folder)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.close)
        shutil.rmtree(folder, ignore_errors=True)


async def _outage(
    server: OwnPostgres, after: float, down: float, then: Callable[[], object] = lambda: None
) -> float:
    """Stop the server after `after` seconds, start it `down` seconds later, then call `then`; returns
    seconds it was down."""
    await asyncio.sleep(after)
    stopped = time.perf_counter()
    await asyncio.to_thread(server.stop)
    await asyncio.sleep(down)
    await asyncio.to_thread(server.start)
    then()
    return time.perf_counter() - stopped


@case(
    "database",
    "restart-during-import",
    did="`personae import` of N exchanges; its PostgreSQL stopped (pg_ctl stop -m fast) at a random "
    "moment of the import and started 2 s later; then the same import run again, as a user would",
    expected="the interrupted run ends with one clear line (no traceback); the rerun completes; every "
    "message stored once, every exchange remembered once, nothing pending",
)
async def restart_during_import(lab: Lab, scale: Scale) -> Outcome:
    exchanges = scale.pick(100, 2000)
    rng = random.Random(scale.seed)
    transcript = lab.workdir / "db-transcript.jsonl"
    write_transcript(transcript, exchanges, rng)
    async with own_postgres() as server:
        env: dict[str, Any] = {"database_url": server.url, "personae_data_dir": lab.workdir / "db-import"}
        await prepare_database(server.url, "sage")
        args = ("import", str(transcript), "--personality", "sage", "--mode", "summarized")
        # Roughly when the import is busy: it starts in about 3 s and takes a few more.
        outage = asyncio.create_task(_outage(server, rng.uniform(3.0, 3.0 + exchanges / 300), 2.0))
        first = await lab.cli(*args, **env)
        down = await outage
        second = await lab.cli(*args, **env)
        [counts] = await rows_at(
            server.url,
            "SELECT (SELECT count(*) FROM messages) AS messages, "
            "(SELECT count(DISTINCT external_id) FROM messages) AS distinct_ids, "
            "(SELECT count(*) FROM messages WHERE memory_processed_at IS NULL) AS pending, "
            "(SELECT count(*) FROM memories) AS memories",
        )
    interrupted = first.code != 0
    clear = not first.traceback if interrupted else True
    ok = (
        clear
        and second.code == 0
        and counts["messages"] == counts["distinct_ids"] == 2 * exchanges
        and counts["memories"] == exchanges
        and counts["pending"] == 0
    )
    said = f"said {first.one_line()[:160]!r}" if interrupted else "finished despite the stop"
    return check(
        ok,
        f"the interrupted run {said}"
        + (" (with a traceback)" if first.traceback else "")
        + f"; rerun exit {second.code}; {counts['messages']} messages of {2 * exchanges}, "
        f"{counts['memories']} memories of {exchanges}, {counts['pending']} pending",
        figures(exchanges=exchanges, database_down_s=f"{down:.1f}", first_run_exit=first.code),
    )


@case(
    "database",
    "restart-during-chat-turn",
    did="a chat turn whose model takes 5 s (at the quick scale: until PostgreSQL is back); PostgreSQL "
    "stopped 0.5 s into it and started again before the reply; then another turn",
    expected="the reply is stored once the database is back, the next turn is answered, every exchange "
    "remembered once",
)
async def restart_during_chat(lab: Lab, scale: Scale) -> Outcome:
    async with (
        own_postgres() as server,
        lab.open_runtime(database_url=server.url, personae_data_dir=lab.workdir / "db-chat") as rt,
    ):
        personality, _ = await rt.personalities.create("Ada")
        user = snowflake()
        texts = ["Ada, my sister is called Ilse.", "Ada, Ilse lives in Graz.", "Ada, and her cat is Momo."]
        replies = [await chat_turn(rt.chat, request(personality.id, user, texts[0]))]
        if scale.quick:  # the model answers as soon as the database is back, however long that took
            lab.chat_llm.answering.clear()
            outage = asyncio.create_task(_outage(server, 0.5, 1.0, then=lab.chat_llm.answering.set))
        else:
            lab.chat_llm.script(Stall(5.0))
            outage = asyncio.create_task(_outage(server, 0.5, 1.0))
        error = ""
        try:
            replies.append(await chat_turn(rt.chat, request(personality.id, user, texts[1])))
        except Exception as exc:
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
        down = await outage
        replies.append(await chat_turn(rt.chat, request(personality.id, user, texts[2])))
        conversation = await rows_at(server.url, "SELECT id FROM conversations")
        await rt.chat.after_reply(conversation[0]["id"])
        [counts] = await rows_at(
            server.url,
            "SELECT (SELECT count(*) FROM messages WHERE role = 'user') AS asked, "
            "(SELECT count(*) FROM messages WHERE role = 'assistant') AS answered, "
            "(SELECT count(*) FROM messages WHERE memory_processed_at IS NULL) AS pending",
        )
        memories = [m["content"] for m in await rows_at(server.url, "SELECT content FROM memories")]
    each_once = all(sum(t in m for m in memories) == 1 for t in texts)
    ok = (
        not error
        and all(r.ok for r in replies)
        and counts["asked"] == 3
        and counts["answered"] == 3
        and counts["pending"] == 0
        and each_once
    )
    return check(
        ok,
        (
            f"the turn during the outage raised {error}; "
            if error
            else "the turn during the outage was answered; "
        )
        + f"{sum(r.ok for r in replies)} of 3 replies, {counts['asked']} messages and {counts['answered']} "
        f"replies stored, {counts['pending']} pending, all three remembered: {each_once}",
        figures(database_down_s=f"{down:.1f}"),
    )
