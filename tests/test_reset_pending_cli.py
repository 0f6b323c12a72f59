"""Issue 34: `personae memory reset` cancels what the user said in the conversation that is not yet a
memory. An exchange held back by an embedding outage used to form after the reset: the door code came
back as a memory. What was remembered before the reset stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testkit.cli import closed_port, llm_server_thread, remote_embedder, run


def _transcript(path: Path, *exchanges: tuple[str, str, str]) -> Path:
    lines = []
    for key, said, answer in exchanges:
        lines.append({"id": f"{key}u", "role": "user", "content": said, "user_id": "7"})
        lines.append({"id": f"{key}a", "role": "assistant", "content": answer, "reply_to": f"{key}u"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_reset_cancels_what_an_outage_held_back(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(capsys, "personality", "create", "Keeper")[0] == 0
    first = _transcript(cli_env / "first.jsonl", ("1", "my cat is called Mochi", "Mochi, noted"))
    later = _transcript(cli_env / "later.jsonl", ("2", "the door code is 4921", "4921, noted"))
    with llm_server_thread(embedding_dim=1536) as llm:
        for name, value in remote_embedder(llm.base_url).items():
            monkeypatch.setenv(name, value)
        code, out, err = run(capsys, "import", str(first), "--personality", "keeper")
        assert code == 0 and "memories stored: 1" in out, err
        monkeypatch.setenv("EMBEDDING_API_BASE", f"http://127.0.0.1:{closed_port()}/v1")  # the outage
        code, _, err = run(capsys, "import", str(later), "--personality", "keeper")
        assert code == 1 and "wait in the log" in err  # stored, not formed

        code, out, err = run(capsys, "memory", "reset", "--user", "7", "--personality", "keeper")
        assert code == 0, err
        assert "Anything they said there that is not yet a memory never will be" in out

        monkeypatch.setenv("EMBEDDING_API_BASE", llm.base_url)  # the model is back
        code, out, err = run(capsys, "import", str(later), "--personality", "keeper")  # forms what waits
        assert code == 0, err
        assert "memories stored: 0" in out
        code, out, err = run(capsys, "memory", "list", "--user", "7")
        assert code == 0, err
        assert "4921" not in out and "Mochi" in out
        code, out, _ = run(capsys, "memory", "stats")
        assert "pending: 0 messages" in out
