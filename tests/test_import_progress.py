"""Issue 30: `personae import`'s bar moves as the summarizer's calls settle exchanges, not once per
64-exchange batch written. With a slow local model the bar sat at 0 % for minutes, then jumped to 100 %.

Run as a user runs it: `python -m bot.cli import` in a process of its own, the summarizer a model
server on this machine (the test server, each answer taking a while), the bar read from its stderr."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

from testkit.llm_server import LLMTestServer, SummarizerModel

EXCHANGES = 20  # one conversation's, all in one batch of formation (64)
# Each answer takes at least this long: longer than tqdm's 0.1 s between redraws, so no state of the
# bar is skipped for coming too soon after the one before.
ANSWER_SECONDS = 0.3
_BAR_RE = re.compile(r"Remembering garden\.jsonl:.*?\b(\d+)/(\d+)\b")


def _garden_chat(path: Path) -> None:
    """One user's chat in one channel, each exchange long enough to be summarized."""
    lines = []
    for n in range(1, EXCHANGES + 1):
        said = (
            f"I planted {n} tomato seedlings in raised bed number {n} this morning, beside the basil and "
            "the marigolds, and watered them twice because the soil was dry after the sunny weekend."
        )
        reply = (
            f"Bed {n} sounds lovely, Alice. Keep those {n} seedlings moist, and look under the leaves for "
            "aphids every morning this week."
        )
        where = {"guild_id": "G", "channel_id": "C"}
        lines.append(
            {"id": f"u{n}", "role": "user", "content": said, "user_id": "A", "author": "Alice", **where}
        )
        lines.append({"id": f"r{n}", "role": "assistant", "content": reply, "reply_to": f"u{n}", **where})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


async def _cli(env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", *argv, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(600):  # a hang guard, not a timing assertion
        out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def test_the_bar_moves_as_each_call_settles_its_exchanges(
    scratch_database_url: str, tmp_path: Path
) -> None:
    async with LLMTestServer(embedding_dim=1536, responder=SummarizerModel("faithful")) as llm:
        env = {
            **os.environ,
            "DATABASE_URL": scratch_database_url,
            "PERSONAE_DATA_DIR": str(tmp_path / "data"),
            "EMBEDDING_MODEL": "openai/text-embedding-3-small",
            "EMBEDDING_API_BASE": llm.base_url,
            "OPENAI_API_KEY": "test",
            # On 127.0.0.1: served one call at a time at first, as a local llama.cpp server is.
            "SUMMARIZER_MODEL": "openai/test-model",
            "SUMMARIZER_API_BASE": llm.base_url,
            "SUMMARIZER_API_KEY": "test",
        }
        for variable in ("QDRANT_URL", "CHAT_MODEL"):
            env.pop(variable, None)
        code, _, err = await _cli(env, "personality", "create", "Sage", "--memory-mode", "summarized")
        assert code == 0, err
        llm.latency = ANSWER_SECONDS
        chat = tmp_path / "garden.jsonl"
        _garden_chat(chat)
        code, out, err = await _cli(env, "import", str(chat), "--personality", "sage")
        assert code == 0, err
        assert f"memories stored: {EXCHANGES}" in out
        summarizer_calls = [r for r in llm.requests if r.get("messages")]
        assert len(summarizer_calls) >= 3  # 8 exchanges a call at most

    states = [(int(done), int(total)) for done, total in _BAR_RE.findall(err)]
    assert states and {total for _, total in states} == {EXCHANGES}, err
    # All the exchanges are one batch of formation (read, summarized, written together): before, the
    # bar went from 0 to all when that batch was written. Now each call's exchanges show as it answers.
    assert any(0 < done < EXCHANGES for done, _ in states), states
    assert [done for done, _ in states] == sorted(done for done, _ in states)  # never backwards
