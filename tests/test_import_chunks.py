"""Issue 33: a long import commits a chunk at a time, each remembered before the next is read, and the
same import run again resumes: a 1,000,000-line import used to commit nothing for over 7 minutes, so an
interruption kept nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from memory.formation.importer import CHUNK_LINES
from models import Memory, Message
from models.database import create_engine, create_sessionmaker
from testkit.cli import llm_server_thread, remote_embedder, run

EXCHANGES = CHUNK_LINES // 2 + 50  # a whole chunk and a tenth of one more: 1,100 lines


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


def stored(database_url: str) -> tuple[int, int]:
    """The messages and the live memories stored (the CLI runs an event loop of its own, so this too)."""
    return asyncio.run(counts(database_url))


async def counts(database_url: str) -> tuple[int, int]:
    engine = create_engine(database_url)
    try:
        async with create_sessionmaker(engine)() as session:
            said = await session.scalar(select(func.count(Message.id)))
            kept = await session.scalar(select(func.count(Memory.id)).where(Memory.state != "deleted"))
    finally:
        await engine.dispose()
    return int(said or 0), int(kept or 0)


def test_an_import_stopped_in_its_second_chunk_keeps_the_first_and_resumes(
    cli_env: Path,
    scratch_database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = CHUNK_LINES + 51  # in the second chunk
    path = cli_env / "long.jsonl"
    path.write_text(transcript(broken_at=broken))
    with llm_server_thread(embedding_dim=1536) as llm:  # embeddings over HTTP: quick at this scale
        for name, value in remote_embedder(llm.base_url).items():
            monkeypatch.setenv(name, value)
        assert run(capsys, "personality", "create", "Keeper")[0] == 0
        code, _, err = run(capsys, "import", str(path), "--personality", "keeper")
        assert code != 0
        said = err.strip().splitlines()[-1]
        assert f"Line {broken}: not valid JSON" in said, said
        assert f"The {CHUNK_LINES} lines before its chunk are stored and remembered" in said
        # The first chunk is in the log, each of its exchanges a memory; nothing of the second.
        assert stored(scratch_database_url) == (CHUNK_LINES, CHUNK_LINES // 2)
        path.write_text(transcript())  # the line fixed
        code, out, err = run(capsys, "import", str(path), "--personality", "keeper")
        assert code == 0, err
        assert f"messages read:   {2 * EXCHANGES} ({2 * EXCHANGES - CHUNK_LINES} new)" in out
        assert stored(scratch_database_url) == (2 * EXCHANGES, EXCHANGES)
        code, out, _ = run(capsys, "import", str(path), "--personality", "keeper")
        assert code == 0 and f"({0} new)" in out and "memories stored: 0" in out
        assert stored(scratch_database_url) == (2 * EXCHANGES, EXCHANGES)
