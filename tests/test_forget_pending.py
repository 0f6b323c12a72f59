"""Issue 33, item 5: `forget all` forgets what is still forming. An exchange held back by an embedding
outage used to form after `memory forget all`: the door code came back as a memory."""

from __future__ import annotations

import json
from pathlib import Path

from testkit.cli import closed_port, remote_embedder, run_process
from testkit.llm_server import LLMTestServer


async def test_forget_all_cancels_what_an_outage_held_back(
    cli_process_env: dict[str, str], tmp_path: Path
) -> None:
    env = cli_process_env | remote_embedder(f"http://127.0.0.1:{closed_port()}/v1")  # the outage
    assert (await run_process(env, "personality", "create", "Keeper"))[0] == 0
    path = tmp_path / "t.jsonl"
    lines = [
        {"id": "1", "role": "user", "content": "the door code is 4921", "user_id": "7"},
        {"id": "2", "role": "assistant", "content": "4921, noted", "reply_to": "1"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, _, err = await run_process(env, "import", str(path), "--personality", "keeper")
    assert code == 1 and "wait in the log" in err  # stored, not formed

    code, _, err = await run_process(env, "memory", "forget", "all", "--user", "7", "--yes")
    assert code == 0, err

    async with LLMTestServer(embedding_dim=1536) as llm:  # the model is back
        env["EMBEDDING_API_BASE"] = llm.base_url
        code, out, err = await run_process(
            env, "import", str(path), "--personality", "keeper"
        )  # forms what waits
        assert code == 0, err
        assert "memories stored: 0" in out
        code, out, err = await run_process(env, "memory", "list", "--user", "7")
        assert code == 0, err
        assert "4921" not in out
        code, out, _ = await run_process(env, "memory", "stats")
        assert "pending: 0 messages" in out
