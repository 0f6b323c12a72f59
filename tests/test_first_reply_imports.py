"""The first reply after a start loads nothing on the event loop: what a reply's path imports lazily
(litellm and the OpenAI SDK for the model, wordfreq for recall's ranking of a question's words) is
loaded by the start's warm-up thread (bot.cli.warm_up) before the chat's prompt, never by the reply."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from testkit.llm_server import LLMTestServer
from tests.test_chat_cli import environment, personae

# `personae` with every import of these packages recorded with the thread that made it.
WATCHED = """
import atexit, sys, threading

LAZY = ("litellm", "openai", "wordfreq")
on_the_loop = set()

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in LAZY and threading.current_thread() is threading.main_thread():
            on_the_loop.add(name.split(".")[0])
        return None

sys.meta_path.insert(0, Watch())
atexit.register(lambda: print("imported on the event loop:", sorted(on_the_loop), file=sys.stderr))
from bot.cli import main
sys.exit(main(sys.argv[1:]))
"""


async def test_the_first_reply_imports_nothing_on_the_event_loop(
    scratch_database_url: str, llm_server: LLMTestServer, tmp_path: Path
) -> None:
    llm_server.responder = lambda body: "Roses like the sun."
    env = environment(
        scratch_database_url, tmp_path, CHAT_MODEL="openai/test-chat", CHAT_API_BASE=llm_server.base_url
    )
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    assert (await personae("personality", "create", "Sage", env=env, cwd=tmp_path))[0] == 0
    script = tmp_path / "watched.py"
    script.write_text(WATCHED)
    # A question of several words: recall ranks them by how rare they are (wordfreq's tables).
    typed = b"What do my garden roses need in winter?\n/quit\n"
    chat = await asyncio.create_subprocess_exec(
        *(sys.executable, str(script), "chat", "--personality", "sage", "--user", "42"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    out, err = (text.decode() for text in await asyncio.wait_for(chat.communicate(typed), timeout=180))
    assert chat.returncode == 0, err
    assert "Roses like the sun." in out
    assert "imported on the event loop: []" in err, err
