"""Issue 33, item 5: `forget all` forgets what is still forming. An exchange held back by an embedding
outage used to form after `memory forget all`: the door code came back as a memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testkit.cli import closed_port, llm_server_thread, remote_embedder, run


def test_forget_all_cancels_what_an_outage_held_back(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in remote_embedder(f"http://127.0.0.1:{closed_port()}/v1").items():  # the outage
        monkeypatch.setenv(name, value)
    assert run(capsys, "personality", "create", "Keeper")[0] == 0
    path = cli_env / "t.jsonl"
    lines = [
        {"id": "1", "role": "user", "content": "the door code is 4921", "user_id": "7"},
        {"id": "2", "role": "assistant", "content": "4921, noted", "reply_to": "1"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, _, err = run(capsys, "import", str(path), "--personality", "keeper")
    assert code == 1 and "wait in the log" in err  # stored, not formed

    code, _, err = run(capsys, "memory", "forget", "all", "--user", "7", "--yes")
    assert code == 0, err

    with llm_server_thread(embedding_dim=1536) as llm:  # the model is back
        monkeypatch.setenv("EMBEDDING_API_BASE", llm.base_url)
        # The same import again forms what waits: nothing, once forgotten.
        code, out, err = run(capsys, "import", str(path), "--personality", "keeper")
        assert code == 0, err
        assert "memories stored: 0" in out
        code, out, err = run(capsys, "memory", "list", "--user", "7")
        assert code == 0, err
        assert "4921" not in out
        code, out, _ = run(capsys, "memory", "stats")
        assert "pending: 0 messages" in out
