"""Issue 34: `personae memory reset` cancels what the user said in the conversation that is not yet a
memory. An exchange held back by an embedding outage used to form after the reset: the door code came
back as a memory. What was remembered before the reset stays."""

from __future__ import annotations

import json
import os
from pathlib import Path

from testkit.llm_server import LLMTestServer
from tests.test_forget_pending import _cli, _closed_port


def _transcript(path: Path, *exchanges: tuple[str, str, str]) -> Path:
    lines = []
    for key, said, answer in exchanges:
        lines.append({"id": f"{key}u", "role": "user", "content": said, "user_id": "7"})
        lines.append({"id": f"{key}a", "role": "assistant", "content": answer, "reply_to": f"{key}u"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def test_reset_cancels_what_an_outage_held_back(scratch_database_url: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": scratch_database_url,
        "PERSONAE_DATA_DIR": str(tmp_path / "data"),
        "EMBEDDING_MODEL": "openai/text-embedding-3-small",
        "OPENAI_API_KEY": "test",
    }
    for variable in ("QDRANT_URL", "SUMMARIZER_MODEL", "CHAT_MODEL"):
        env.pop(variable, None)
    assert (await _cli(env, "personality", "create", "Keeper"))[0] == 0
    first = _transcript(tmp_path / "first.jsonl", ("1", "my cat is called Mochi", "Mochi, noted"))
    later = _transcript(tmp_path / "later.jsonl", ("2", "the door code is 4921", "4921, noted"))
    async with LLMTestServer(embedding_dim=1536) as llm:
        env["EMBEDDING_API_BASE"] = llm.base_url
        code, out, err = await _cli(env, "import", str(first), "--personality", "keeper")
        assert code == 0 and "memories stored: 1" in out, err
        env["EMBEDDING_API_BASE"] = f"http://127.0.0.1:{_closed_port()}/v1"  # the outage
        code, _, err = await _cli(env, "import", str(later), "--personality", "keeper")
        assert code == 1 and "wait in the log" in err  # stored, not formed

        code, out, err = await _cli(env, "memory", "reset", "--user", "7", "--personality", "keeper")
        assert code == 0, err
        assert "Anything they said there that is not yet a memory never will be" in out

        env["EMBEDDING_API_BASE"] = llm.base_url  # the model is back
        code, out, err = await _cli(env, "import", str(later), "--personality", "keeper")  # forms what waits
        assert code == 0, err
        assert "memories stored: 0" in out
        code, out, err = await _cli(env, "memory", "list", "--user", "7")
        assert code == 0, err
        assert "4921" not in out and "Mochi" in out
        code, out, _ = await _cli(env, "memory", "stats")
        assert "pending: 0 messages" in out
