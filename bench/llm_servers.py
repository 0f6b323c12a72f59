"""The LLM test server as a benchmark's provider: in a child process of its own, as a provider runs
elsewhere (its CPU is not the bench's), or in the bench's own event loop; with the counts a bench
reports (requests answered, 429s sent, the peak of calls in flight)."""

from __future__ import annotations

import asyncio
import multiprocessing
from dataclasses import dataclass
from multiprocessing.connection import Connection

from testkit.llm_server import LLMTestServer, answering_each


@dataclass(frozen=True)
class ServerStats:
    answered: int  # requests accepted and answered
    refused: int  # 429s sent for the concurrency limit
    peak_in_flight: int


class BenchServer:
    """The LLM test server answering `reply` for each exchange of every call, in a child process or in
    this one."""

    def __init__(self, *, latency: float, limit: int, reply: str, in_process: bool) -> None:
        self.latency, self.limit, self.reply, self.in_process = latency, limit, reply, in_process
        self.base_url = ""
        self._local: LLMTestServer | None = None
        self._conn: Connection | None = None
        self._process: multiprocessing.process.BaseProcess | None = None

    async def __aenter__(self) -> BenchServer:
        if self.in_process:
            self._local = LLMTestServer(
                latency=self.latency, concurrency_limit=self.limit, responder=answering_each(self.reply)
            )
            await self._local.__aenter__()
            self.base_url = self._local.base_url
        else:
            context = multiprocessing.get_context("spawn")
            self._conn, child = context.Pipe()
            self._process = context.Process(
                target=_serve, args=(child, self.latency, self.limit, self.reply), daemon=True
            )
            self._process.start()
            self.base_url = await asyncio.to_thread(self._conn.recv)
        return self

    async def stats(self, *, reset: bool = False) -> ServerStats:
        """Requests so far; `reset` starts the refusal count and the peak afresh."""
        if self._local is not None:
            return _stats(self._local, reset)
        assert self._conn is not None
        self._conn.send("reset" if reset else "stats")
        return await asyncio.to_thread(self._conn.recv)

    async def __aexit__(self, *exc: object) -> None:
        if self._local is not None:
            await self._local.__aexit__(None, None, None)
        if self._conn is not None and self._process is not None:
            self._conn.send("stop")
            await asyncio.to_thread(self._process.join, 10)
            if self._process.is_alive():
                self._process.terminate()


def _stats(server: LLMTestServer, reset: bool) -> ServerStats:
    if reset:
        server.rejected, server.max_in_flight = 0, server.in_flight
    return ServerStats(len(server.requests), server.rejected, server.max_in_flight)


def _serve(conn: Connection, latency: float, limit: int, reply: str) -> None:
    asyncio.run(_serve_until_stopped(conn, latency, limit, reply))


async def _serve_until_stopped(conn: Connection, latency: float, limit: int, reply: str) -> None:
    server = LLMTestServer(latency=latency, concurrency_limit=limit, responder=answering_each(reply))
    async with server:
        conn.send(server.base_url)
        while (command := await asyncio.to_thread(conn.recv)) != "stop":
            conn.send(_stats(server, command == "reset"))
