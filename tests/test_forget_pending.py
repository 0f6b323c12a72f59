"""Issue 33, item 5: `forget all` forgets what is still forming. An exchange held back by an embedding
outage used to form after `memory forget all`: the door code came back as a memory."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path

from testkit.llm_server import LLMTestServer


async def _cli(env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        *argv,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_forget_all_cancels_what_an_outage_held_back(scratch_database_url: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": scratch_database_url,
        "PERSONAE_DATA_DIR": str(tmp_path / "data"),
        "EMBEDDING_MODEL": "openai/text-embedding-3-small",
        "EMBEDDING_API_BASE": f"http://127.0.0.1:{_closed_port()}/v1",  # the outage
        "OPENAI_API_KEY": "test",
    }
    for variable in ("QDRANT_URL", "SUMMARIZER_MODEL", "CHAT_MODEL"):
        env.pop(variable, None)
    assert (await _cli(env, "personality", "create", "Keeper"))[0] == 0
    path = tmp_path / "t.jsonl"
    lines = [
        {"id": "1", "role": "user", "content": "the door code is 4921", "user_id": "7"},
        {"id": "2", "role": "assistant", "content": "4921, noted", "reply_to": "1"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, _, err = await _cli(env, "import", str(path), "--personality", "keeper")
    assert code == 1 and "wait in the log" in err  # stored, not formed

    code, _, err = await _cli(env, "memory", "forget", "all", "--user", "7", "--yes")
    assert code == 0, err

    async with LLMTestServer(embedding_dim=1536) as llm:  # the model is back
        env["EMBEDDING_API_BASE"] = llm.base_url
        code, out, err = await _cli(env, "import", str(path), "--personality", "keeper")  # forms what waits
        assert code == 0, err
        assert "memories stored: 0" in out
        code, out, err = await _cli(env, "memory", "list", "--user", "7")
        assert code == 0, err
        assert "4921" not in out
        code, out, _ = await _cli(env, "memory", "stats")
        assert "pending: 0 messages" in out
