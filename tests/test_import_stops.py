"""Issue 33, item 3: SIGTERM and SIGINT end `personae import` with a message and a non-zero status (it
used to exit 0 on SIGTERM, saying nothing), and the same import run again adds the rest."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.cli import llm_server_thread, remote_embedder, run
from testkit.llm_server import Stall


@pytest.mark.parametrize(
    ("sent", "status", "named"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")]
)
def test_a_stopped_import_says_so_and_exits_non_zero(
    cli_env: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    sent: signal.Signals,
    status: int,
    named: str,
) -> None:
    # The import that is stopped is a process of its own (what a signal does to it is what is tested);
    # the commands around it run in-process.
    with llm_server_thread(embedding_dim=1536) as llm:  # text-embedding-3-small's size
        for name, value in remote_embedder(llm.base_url).items():
            monkeypatch.setenv(name, value)
        assert run(capsys, "personality", "create", "Keeper")[0] == 0
        path = cli_env / "t.jsonl"
        lines = [
            {"id": "1", "role": "user", "content": "my bike is blue", "user_id": "7"},
            {"id": "2", "role": "assistant", "content": "blue, noted", "reply_to": "1"},
        ]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        llm.script(Stall(120))  # the import's first embedding hangs: it is under way
        process = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "import", str(path), "--personality", "keeper"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        guard = time.monotonic() + 120  # a hang guard, not a timing assertion
        while llm.in_flight == 0 and process.poll() is None:
            assert time.monotonic() < guard, "the import never asked for an embedding"
            time.sleep(0.05)
        process.send_signal(sent)
        _, err = process.communicate(timeout=120)
        assert process.returncode == status
        said = err.decode().strip().splitlines()[-1]
        stopped = "personae: import stopped: what was stored stays; run the same import again to add the rest"
        assert said.endswith(f"{stopped} ({named}).")
        llm.reset()
        code, out, err_again = run(capsys, "import", str(path), "--personality", "keeper")
        assert code == 0, err_again
        assert "memories stored: 1" in out
