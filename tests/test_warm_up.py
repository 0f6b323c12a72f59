"""The model client is loaded off the event loop at start (bot.cli.warm_up): litellm is imported in a
thread of its own, and the first real call, over HTTP to the test server, has nothing left to import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import asyncio, sys, threading
from testkit.llm_server import LLMTestServer

imported_in = {}

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in ("litellm", "openai"):
            imported_in.setdefault(name, threading.current_thread().name)
        return None

sys.meta_path.insert(0, Watch())

async def main():
    from bot.cli.warm_up import ModelClientWarmUp
    from memory.llm import LLMClient
    from memory.types import ModelConfig

    async with LLMTestServer(responder=lambda body: "hello there") as server:
        warm_up = ModelClientWarmUp("openai/test-chat")
        await warm_up.ready()
        before = set(sys.modules)
        cfg = ModelConfig(model="openai/test-chat", api_base=server.base_url)
        reply = [piece async for piece in LLMClient().stream(cfg, [{"role": "user", "content": "hi"}])]
        loaded = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("litellm", "openai"))
        print("".join(reply), imported_in, loaded)

asyncio.run(main())
"""


def test_the_first_call_finds_the_model_client_loaded_by_a_thread_of_its_own() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).parents[1],
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ("hello there {'litellm': 'llm-warm-up', 'openai': 'llm-warm-up'} []"), (
        result.stdout
    )
