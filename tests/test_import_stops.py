"""Issue 33, item 3: SIGTERM and SIGINT end `personae import` with a message and a non-zero status (it
used to exit 0 on SIGTERM, saying nothing), and the same import run again adds the rest."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from testkit.cli import remote_embedder, run_process
from testkit.llm_server import LLMTestServer, Stall


@pytest.mark.parametrize(
    ("sent", "status", "named"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")]
)
async def test_a_stopped_import_says_so_and_exits_non_zero(
    cli_process_env: dict[str, str], tmp_path: Path, sent: signal.Signals, status: int, named: str
) -> None:
    async with LLMTestServer(embedding_dim=1536) as llm:  # text-embedding-3-small's size
        env = cli_process_env | remote_embedder(llm.base_url)
        assert (await run_process(env, "personality", "create", "Keeper"))[0] == 0
        path = tmp_path / "t.jsonl"
        lines = [
            {"id": "1", "role": "user", "content": "my bike is blue", "user_id": "7"},
            {"id": "2", "role": "assistant", "content": "blue, noted", "reply_to": "1"},
        ]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        llm.script(Stall(120))  # the import's first embedding hangs: it is under way
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "import", str(path), "--personality", "keeper",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(120):  # a hang guard, not a timing assertion
            while llm.in_flight == 0 and process.returncode is None:  # noqa: ASYNC110 (a counter, no event)
                await asyncio.sleep(0.05)
        process.send_signal(sent)
        _, err = await process.communicate()
        assert process.returncode == status
        said = err.decode().strip().splitlines()[-1]
        stopped = "personae: import stopped: what was stored stays; run the same import again to add the rest"
        assert said.endswith(f"{stopped} ({named}).")
        llm.reset()
        code, out, err_again = await run_process(env, "import", str(path), "--personality", "keeper")
        assert code == 0, err_again
        assert "memories stored: 1" in out
