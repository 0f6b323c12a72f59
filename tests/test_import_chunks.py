"""Issue 33: a long import commits a chunk at a time, each remembered before the next is read, and the
same import run again resumes: a 1,000,000-line import used to commit nothing for over 7 minutes, so an
interruption kept nothing."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from memory.transfer.importer import CHUNK_LINES
from models import Memory, Message
from models.database import create_engine, create_sessionmaker
from testkit.cli import llm_server_thread, remote_embedder, run
from testkit.llm_server import echo_first_sentence

EXCHANGES = CHUNK_LINES // 2 + 50  # a whole chunk and 100 lines more


def transcript(*, broken_at: int | None = None) -> str:
    lines = []
    for n in range(EXCHANGES):
        lines.append(
            {"id": f"u{n}", "role": "user", "content": f"my locker {n} code is {n * 7}", "user_id": "7"}
        )
        lines.append(
            {"id": f"r{n}", "role": "assistant", "content": f"locker {n}, noted", "reply_to": f"u{n}"}
        )
    text = [json.dumps(line) for line in lines]
    if broken_at is not None:
        text[broken_at - 1] = text[broken_at - 1][:-1]  # a line cut short
    return "\n".join(text) + "\n"


def stored(database_url: str) -> tuple[int, int, int]:
    """The messages, the live memories and the messages still to form (the CLI runs an event loop of
    its own, so this too)."""
    return asyncio.run(counts(database_url))


async def counts(database_url: str) -> tuple[int, int, int]:
    engine = create_engine(database_url)
    try:
        async with create_sessionmaker(engine)() as session:
            said = await session.scalar(select(func.count(Message.id)))
            kept = await session.scalar(select(func.count(Memory.id)).where(Memory.state != "deleted"))
            pending = await session.scalar(
                select(func.count(Message.id)).where(Message.memory_processed_at.is_(None))
            )
    finally:
        await engine.dispose()
    return int(said or 0), int(kept or 0), int(pending or 0)


def test_a_line_refused_in_the_second_chunk_keeps_the_first_and_the_fixed_file_adds_the_rest(
    cli_env: Path, scratch_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Formation still reads and marks each chunk's exchanges; the personality remembers nothing, so
    that the test need not wait on an index of a thousand memories (the next test remembers)."""
    broken = CHUNK_LINES + 51  # in the second chunk
    path = cli_env / "long.jsonl"
    path.write_text(transcript(broken_at=broken))
    assert run(capsys, "personality", "create", "Keeper")[0] == 0
    assert run(capsys, "personality", "set", "keeper", "--memory", "off")[0] == 0
    code, _, err = run(capsys, "import", str(path), "--personality", "keeper")
    assert code != 0
    said = err.strip().splitlines()[-1]
    assert f"Line {broken}: not valid JSON" in said, said
    assert f"The {CHUNK_LINES} lines before its chunk are stored and remembered" in said
    # The first chunk is in the log, each of its exchanges formed; nothing of the second.
    assert stored(scratch_database_url) == (CHUNK_LINES, 0, 0)
    path.write_text(transcript())  # the line fixed
    code, out, err = run(capsys, "import", str(path), "--personality", "keeper")
    assert code == 0, err
    assert f"messages read:   {2 * EXCHANGES} ({2 * EXCHANGES - CHUNK_LINES} new)" in out
    assert stored(scratch_database_url) == (2 * EXCHANGES, 0, 0)
    code, out, _ = run(capsys, "import", str(path), "--personality", "keeper")
    assert code == 0 and "(0 new)" in out
    assert stored(scratch_database_url) == (2 * EXCHANGES, 0, 0)


def long_exchange(n: int) -> list[dict[str, Any]]:
    """An exchange of user 8 long enough to be summarized."""
    said = (
        f"Today I repainted fence panel number {n} in a deep green, then cleared the gutters above the "
        "shed, because the autumn leaves had blocked them again after the storm last night."
    )
    reply = f"Panel {n} in deep green sounds smart, and clear gutters will spare the shed this winter."
    return [
        {"id": f"lu{n}", "role": "user", "content": said, "user_id": "8"},
        {"id": f"lr{n}", "role": "assistant", "content": reply, "reply_to": f"lu{n}"},
    ]


def test_an_import_stopped_by_sigterm_in_its_first_chunk_resumes_when_run_again(
    cli_env: Path,
    scratch_database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stopped while its first chunk forms (the summarizer holds its first call): that chunk is
    committed, the rest unread; before, nothing was committed until the whole file was stored. Most
    lines are user 7's, who turned memory off (formation marks them, cheaply); user 8's are
    summarized, one opening each chunk."""
    entered, release = threading.Event(), threading.Event()

    def held_summarizer(request: dict[str, Any]) -> str:
        entered.set()
        release.wait(timeout=300)  # the server's loop waits with it: every call of the import does
        return echo_first_sentence(request)

    short = [json.loads(line) for line in transcript().splitlines()]
    lines = long_exchange(0) + short[: CHUNK_LINES - 2] + long_exchange(1) + short[CHUNK_LINES:]
    path = cli_env / "fence.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with llm_server_thread(embedding_dim=1536, responder=held_summarizer) as llm:
        environment = {
            **remote_embedder(llm.base_url),
            "SUMMARIZER_MODEL": "openai/test-model",
            "SUMMARIZER_API_BASE": llm.base_url,
            "SUMMARIZER_API_KEY": "test",
        }
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        assert run(capsys, "personality", "create", "Keeper", "--memory-mode", "summarized")[0] == 0
        assert run(capsys, "memory", "settings", "--user", "7", "--memory", "off")[0] == 0
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "bot.cli", "import", str(path), "--personality", "keeper"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            assert entered.wait(timeout=600), "the import never asked the summarizer"  # a hang guard
            assert stored(scratch_database_url)[0] == CHUNK_LINES  # the first chunk committed
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=300)
        finally:
            release.set()
        assert process.returncode == 143, err.decode()[-500:]
        assert "run the same import again to add the rest (SIGTERM)." in err.decode()
        assert stored(scratch_database_url)[:2] == (CHUNK_LINES, 0)  # its formation to finish
        code, out, err_again = run(capsys, "import", str(path), "--personality", "keeper")
        assert code == 0, err_again
        assert f"messages read:   {len(lines)} ({len(lines) - CHUNK_LINES} new)" in out
        assert stored(scratch_database_url) == (len(lines), 2, 0)  # user 8's two exchanges, once
