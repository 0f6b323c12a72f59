"""`personae` run by a test in-process through `main()`, in an environment of its own (the `cli_env`
fixture of tests/conftest.py), beside the LLM test server if it needs one."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from testkit.llm_server import LLMTestServer

# What the machine's environment may name that a CLI test must not inherit: a Qdrant server, models.
INHERITED = ("QDRANT_URL", "SUMMARIZER_MODEL", "CHAT_MODEL", "EMBEDDING_MODEL", "EMBEDDING_API_BASE")


def cli_environment(database_url: str, data_dir: Path) -> dict[str, str]:
    """The variables a CLI test sets: its database, its data directory (hence its own embedded index)."""
    return {"DATABASE_URL": database_url, "PERSONAE_DATA_DIR": str(data_dir)}


def remote_embedder(api_base: str) -> dict[str, str]:
    """The variables that make `personae` embed over HTTP at `api_base` (the LLM test server's, or a
    closed port for an outage) instead of with its local model."""
    return {
        "EMBEDDING_MODEL": "openai/text-embedding-3-small",  # its vectors: 1536 floats
        "EMBEDDING_API_BASE": api_base,
        "OPENAI_API_KEY": "test",
    }


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: a model server that is down."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`personae ARGV` in this process: (exit status, stdout, stderr)."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@contextlib.contextmanager
def llm_server_thread(**options: Any) -> Iterator[LLMTestServer]:
    """The LLM test server on an event loop of its own, in a thread: `run` works beside it, as `main()`
    runs an event loop of its own (a real process is needed only for what a process shows)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="llm-test-server", daemon=True)
    thread.start()
    server = LLMTestServer(**options)
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=60)
        yield server
    finally:
        with contextlib.suppress(Exception):  # a server that never started has nothing to close
            asyncio.run_coroutine_threadsafe(server.close(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=60)
        loop.close()
