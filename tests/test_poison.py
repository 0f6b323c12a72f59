"""Issue 33, item 1: one bad row never stops everyone. A transcript dated on the edge of the documented
range and a memory row that cannot be indexed, each through the CLI against a scratch database and a
real embedded index. (A `personae reindex` killed half-way: the reliability case poison/reindex-killed,
which tests/reliability runs.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from testkit.cli import run


def transcript(folder: Path, name: str, user: str, secret: str, when: str | None = None) -> str:
    stamp = {"timestamp": when} if when else {}
    lines = [
        {
            "id": f"{name}-q",
            "role": "user",
            "content": f"my locker code is {secret}",
            "user_id": user,
            **stamp,
        },
        {
            "id": f"{name}-r",
            "role": "assistant",
            "content": f"{secret}, noted",
            "reply_to": f"{name}-q",
            **stamp,
        },
    ]
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def recalled(capsys: pytest.CaptureFixture[str], personality: str, user: str, query: str) -> list[str]:
    code, out, err = run(capsys, "recall", query, "--personality", personality, "--user", user, "--json")
    assert code == 0, err
    return [m["content"] for m in json.loads(out)["memories"]]


def test_a_transcript_dated_year_one_poisons_nothing(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0001-01-01T00:00:00Z is inside the documented range: it used to read back naive and end every
    later import, the worker and reindex in `year 0 is out of range`."""
    run(capsys, "personality", "create", "Early")
    run(capsys, "personality", "create", "Later")
    code, _, err = run(
        capsys,
        "import",
        transcript(cli_env, "early", "7", "1111", "0001-01-01T00:00:00Z"),
        "--personality",
        "early",
    )
    assert code == 0 and "Traceback" not in err, err
    code, _, err = run(capsys, "import", transcript(cli_env, "later", "8", "2222"), "--personality", "later")
    assert code == 0, err
    assert any("2222" in m for m in recalled(capsys, "later", "8", "locker code"))
    assert any("1111" in m for m in recalled(capsys, "early", "7", "locker code"))
    code, out, err = run(capsys, "reindex")
    assert code == 0 and "Reindexed 2 memories" in out, err
    code, out, _ = run(capsys, "reindex", "--check")
    assert code == 0 and "no drift" in out


async def _sql(url: str, statement: str) -> Any:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            result = await connection.execute(text(statement))
            return result.scalar() if result.returns_rows else None
    finally:
        await engine.dispose()


def test_a_memory_that_cannot_be_indexed_is_set_aside_and_counted(
    cli_env: Path, capsys: pytest.CaptureFixture[str], scratch_database_url: str
) -> None:
    """A row stored before dates were made storable (PostgreSQL's -infinity, which asyncpg reads back
    naive) is set aside: formation, reindex and the other personalities go on without it."""
    run(capsys, "personality", "create", "Early")
    run(capsys, "personality", "create", "Later")
    assert run(capsys, "import", transcript(cli_env, "early", "7", "1111"), "--personality", "early")[0] == 0
    # As an older version stored it: dated -infinity, written to PostgreSQL but not yet indexed.
    asyncio.run(_sql(scratch_database_url, "UPDATE memories SET occurred_at = '-infinity', state = 'formed'"))

    code, _, err = run(capsys, "import", transcript(cli_env, "later", "8", "2222"), "--personality", "later")
    assert code == 0 and "Traceback" not in err, err
    assert any("2222" in m for m in recalled(capsys, "later", "8", "locker code"))
    code, out, _ = run(capsys, "memory", "stats")
    assert "set aside: 1 memories could not be indexed" in out
    code, out, err = run(capsys, "reindex")
    assert code == 0 and "Reindexed 1 memories" in out, err
    code, out, _ = run(capsys, "reindex", "--check")
    assert code == 0 and "set aside (could not be indexed, see the log): 1" in out and "no drift" in out
    assert (
        asyncio.run(_sql(scratch_database_url, "SELECT count(*) FROM memories WHERE state = 'set_aside'"))
        == 1
    )
