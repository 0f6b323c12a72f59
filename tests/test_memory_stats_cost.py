"""Issue 34: `memory stats` names hybrid's cost as a cost (it keeps the summary and the original, so
more than verbatim would), counts both texts, and says when a summarizer model is asked one exchange a
call; /memory status says the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.cli.app import build_parser
from bot.runtime import Runtime
from testkit.llm_server import LLMTestServer
from tests.bot.seeding import seed_memories

USER = "201"
FILLER = "We talked for a long while about the weather, the long winter and the price of bread. "


def exchanges(count: int) -> tuple[tuple[str, str], ...]:
    """Exchanges long enough to be summarized, each about something else."""
    return tuple(
        (f"{FILLER}My neighbour number {n} owns {n + 2} goats and lives in Porto.", f"{n + 2} goats, wow.")
        for n in range(count)
    )


async def stats_output(runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> str:
    """`personae memory stats` through its parser and handler, on this runtime."""
    args = build_parser().parse_args(["memory", "stats"])
    capsys.readouterr()
    await args.handler(args, runtime)
    return capsys.readouterr().out


async def test_hybrid_is_a_cost_with_both_texts_counted(
    runtime: Runtime, capsys: pytest.CaptureFixture[str]
) -> None:
    sage, _ = await runtime.personalities.create("Sage", prompt="You are Sage.", memory_mode="hybrid")
    assert await seed_memories(runtime, sage, USER, exchanges=exchanges(2)) == 2
    stats = await runtime.memory.stats()
    [row] = stats.rows
    assert row.mode == "hybrid" and row.verbatim_chars == row.source_chars  # the original, kept whole
    assert row.kept_chars == row.stored_chars + row.verbatim_chars > row.source_chars

    out = await stats_output(runtime, capsys)
    hybrid = next(line for line in out.splitlines() if line.startswith("hybrid "))
    said, text, originals, kept, change = re.findall(r"[+-]?[\d,]+%?", hybrid)[1:6]
    assert [said, text, originals, kept] == [
        f"{n:,}" for n in (row.source_chars, row.stored_chars, row.verbatim_chars, row.kept_chars)
    ]
    assert change.startswith("+")
    assert f"hybrid ({row.summarizer}) costs {change[1:]} more than storing word for word" in out
    assert "saving" not in out.lower()


async def test_a_model_asked_one_exchange_a_call_is_named(
    runtime: Runtime, llm_server: LLMTestServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    await runtime.personalities.create("Sage", prompt="You are Sage.", memory_mode="summarized")
    assert "one exchange a call" not in await stats_output(runtime, capsys)
    # One line for any prompt: numbered batches of several exchanges cannot be parsed back.
    llm_server.responder = lambda body: "They talked about goats in Porto."
    transcript = tmp_path / "goats.jsonl"
    records = [
        {"id": f"{n}{role[0]}", "role": role, "content": text, "user_id": USER if role == "user" else None}
        for n, pair in enumerate(exchanges(20))  # three batches: 8, 8 and 4
        for role, text in zip(("user", "assistant"), pair, strict=True)
    ]
    transcript.write_text("".join(json.dumps(r) + "\n" for r in records))
    args = build_parser().parse_args(["import", str(transcript), "--personality", "sage"])
    capsys.readouterr()
    await args.handler(args, runtime)
    imported = capsys.readouterr().out
    assert "memories stored: 20" in imported
    assert "summarizer openai/test-summarizer is asked one exchange a call" in imported

    stats = await runtime.memory.stats()
    assert stats.one_exchange_a_call == ["openai/test-summarizer"]
    out = await stats_output(runtime, capsys)
    assert "summarizer openai/test-summarizer is asked one exchange a call" in out
