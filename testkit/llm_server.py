"""A small OpenAI-compatible HTTP server for tests and benchmarks.

litellm talks to it over real HTTP, so its whole request path (client, retries off, exception mapping,
SSE parsing) runs in tests. Behaviour is programmable per test:

    async with LLMTestServer() as server:
        server.script(Fail(429), Reply("hello"))
        cfg = ModelConfig(model="openai/test-model", api_base=server.base_url, api_key="test")

A provider's concurrency limit is played by `concurrency_limit=N`: a request arriving while N are in
flight is refused at once with 429 and `Retry-After`, as a gateway in front of a model server does.

`python -m testkit.llm_server --port 8011 --latency 0.2 [--concurrency-limit 8]` runs it standalone
for benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import logging
import re
import struct
import time
from collections import deque
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

from aiohttp import web

# The behaviours, request readers and summarizer model live beside the server; imported from here too.
from testkit.llm_behaviours import (
    Behaviour,
    Drop,
    Fail,
    NoChoices,
    Reply,
    Stall,
    Trickle,
    error_middleware,
    error_response,
    estimate_tokens,
    hash_vector,
)
from testkit.llm_requests import (
    Responder,
    answering_each,
    content_text,
    echo_first_sentence,
    exchanges_asked,
    last_user_text,
)
from testkit.summarizer_model import INVENTION, REFUSAL, SummarizerModel

__all__ = [
    "INVENTION",
    "MODEL_IDS",
    "REFUSAL",
    "Behaviour",
    "Drop",
    "Fail",
    "LLMTestServer",
    "NoChoices",
    "Reply",
    "Responder",
    "Stall",
    "SummarizerModel",
    "Trickle",
    "answering_each",
    "echo_first_sentence",
    "estimate_tokens",
    "exchanges_asked",
    "hash_vector",
    "last_user_text",
]

log = logging.getLogger(__name__)

# What GET /v1/models lists; POSTs accept any model name unless `known_models` is set.
MODEL_IDS = ("test-model", "test-embedding")


class LLMTestServer:
    """An OpenAI-compatible server on 127.0.0.1 with scripted behaviours; use as an async context."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        embedding_dim: int = 64,
        responder: Responder = echo_first_sentence,
        concurrency_limit: int | None = None,
        limit_retry_after: float = 1.0,
    ) -> None:
        self.host = host
        self.port = port
        self.latency = latency
        self.embedding_dim = embedding_dim
        self.responder = responder
        # The bodies of the requests it accepted (one refused for the concurrency limit only counts in
        # `rejected`).
        self.requests: list[dict[str, Any]] = []
        # The Authorization header of each of those requests (None when it had none).
        self.authorizations: list[str | None] = []
        # None accepts every model name; a set makes other names answer 404 like a real server.
        self.known_models: set[str] | None = None
        # None: any number in flight; N: the (N+1)th concurrent request gets 429 + Retry-After.
        self.concurrency_limit = concurrency_limit
        self.limit_retry_after = limit_retry_after
        self.rejected = 0  # requests refused for the concurrency limit
        # True: an answer longer than the request's max_tokens is cut there, with finish_reason
        # "length", as a real server does (off by default: scripted replies are sent whole).
        self.cut_at_max_tokens = False
        self.in_flight = 0
        self.max_in_flight = 0  # the peak of requests in flight (refused ones never count)
        # Cleared: every request waits (after it is logged in `requests`) until it is set again, so
        # a test can look at what happens while a call is in flight without racing a latency.
        self.answering = asyncio.Event()
        self.answering.set()
        self._script: deque[Behaviour] = deque()
        self._runner: web.AppRunner | None = None
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def script(self, *behaviours: Behaviour) -> None:
        """Queue one-shot behaviours, consumed in order by the next POSTs before the responder."""
        self._script.extend(behaviours)

    @property
    def pending_script(self) -> int:
        return len(self._script)

    def reset(self) -> None:
        """Forget requests, script and peak concurrency (for a server shared between tests)."""
        self._script.clear()
        self.requests.clear()
        self.authorizations.clear()
        self.max_in_flight = self.in_flight
        self.latency = 0.0
        self.responder = echo_first_sentence
        self.known_models = None
        self.concurrency_limit = None
        self.rejected = 0
        self.cut_at_max_tokens = False
        self.answering.set()

    async def start(self) -> None:
        app = web.Application(middlewares=[error_middleware])
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_get("/v1/models", self._models)
        # handler_cancellation: a client that timed out and hung up cancels its stalled handler, so
        # in-flight counts stay true and shutdown never waits for a sleeping handler.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]  # the free port the OS chose for port 0

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ----------------------------------------------------------------- request handling

    @contextlib.contextmanager
    def _tracked(self) -> Iterator[None]:
        if self.concurrency_limit is not None and self.in_flight >= self.concurrency_limit:
            self.rejected += 1
            headers = {"Retry-After": f"{self.limit_retry_after:g}"}
            raise error_response(
                429, f"too many requests in flight (limit {self.concurrency_limit})", headers
            )
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1

    async def _read_json(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            raise error_response(400, "request body is not JSON") from None
        if not isinstance(body, dict):
            raise error_response(400, "request body must be a JSON object")
        self.requests.append(body)
        self.authorizations.append(request.headers.get("Authorization"))
        return body

    async def _apply_script(self, request: web.Request) -> Reply | NoChoices | Trickle | None:
        """Play the next scripted behaviour; returns what shapes the answer, raises for a failure."""
        await self.answering.wait()
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if not self._script:
            return None
        behaviour = self._script.popleft()
        match behaviour:
            case Reply() | NoChoices() | Trickle():
                return behaviour
            case Stall(seconds):
                await asyncio.sleep(seconds)
                return None
            case Fail(status, body, retry_after):
                headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else None
                raise error_response(status, body or f"scripted failure {status}", headers)
            case Drop():
                transport = request.transport
                if transport is not None:
                    transport.abort()  # no FIN dance, no bytes: the client sees the connection die
                raise asyncio.CancelledError
        return None

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        with self._tracked():
            body = await self._read_json(request)
            if not body.get("messages"):
                raise error_response(400, "'messages' is required")
            if self.known_models is not None and body.get("model") not in self.known_models:
                raise error_response(404, f"The model '{body.get('model')}' does not exist")
            scripted = await self._apply_script(request)
            text = scripted.text if isinstance(scripted, Reply) else self.responder(body)
            finish = "stop"
            limit = body.get("max_tokens") or body.get("max_completion_tokens")
            if self.cut_at_max_tokens and limit and estimate_tokens(text) > int(limit):
                text, finish = text[: int(limit) * 4], "length"
            prompt_tokens = sum(estimate_tokens(content_text(m.get("content"))) + 4 for m in body["messages"])
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": estimate_tokens(text),
                "total_tokens": prompt_tokens + estimate_tokens(text),
            }
            completion_id = f"chatcmpl-test{next(self._ids)}"
            created = int(time.time())
            choices = [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            ]
            if not body.get("stream"):
                return web.json_response(
                    {
                        "id": completion_id,
                        "object": "chat.completion",
                        "created": created,
                        "model": body["model"],
                        "choices": [] if isinstance(scripted, NoChoices) else choices,
                        "usage": usage,
                    }
                )
            response = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await response.prepare(request)

            async def send(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
                chunk = {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": body["model"],
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    **extra,
                }
                await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

            await send({"role": "assistant", "content": ""})
            if isinstance(scripted, NoChoices):
                text = ""
            trickle = scripted if isinstance(scripted, Trickle) else Trickle()
            idle_until = time.monotonic() + trickle.idle
            while time.monotonic() < idle_until:
                await asyncio.sleep(0.2)
                await send({"content": ""})
            for piece in re.findall(r"\S+\s*", text):
                await send({"content": piece})
                await asyncio.sleep(trickle.interval)
        # Out of the in-flight count before the last chunks: the client may start its next request as
        # soon as it has read them.
        await send({}, finish=finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            chunk = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body["model"],
                "choices": [],
                "usage": usage,
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _embeddings(self, request: web.Request) -> web.Response:
        with self._tracked():
            body = await self._read_json(request)
            inputs = body.get("input")
            if isinstance(inputs, str):
                inputs = [inputs]
            if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) for i in inputs):
                raise error_response(400, "'input' must be a string or a non-empty list of strings")
            await self._apply_script(request)
            dim = int(body.get("dimensions") or self.embedding_dim)
            data = []
            for index, text in enumerate(inputs):
                vector = hash_vector(text, dim)
                # The OpenAI SDK asks for base64 unless told otherwise, then decodes float32 itself.
                embedding: Any = (
                    base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
                    if body.get("encoding_format") == "base64"
                    else vector
                )
                data.append({"object": "embedding", "index": index, "embedding": embedding})
            tokens = sum(estimate_tokens(text) for text in inputs)
            return web.json_response(
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", "test-embedding"),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
            )

    async def _models(self, request: web.Request) -> web.Response:
        models = [{"id": m, "object": "model", "created": 0, "owned_by": "personae-tests"} for m in MODEL_IDS]
        return web.json_response({"object": "list", "data": models})


async def _serve(host: str, port: int, latency: float, embedding_dim: int, limit: int | None) -> None:
    server = LLMTestServer(
        host=host, port=port, latency=latency, embedding_dim=embedding_dim, concurrency_limit=limit
    )
    async with server:
        bound = f", 429 above {limit} in flight" if limit is not None else ""
        print(
            f"OpenAI-compatible test server at {server.base_url} (latency {latency:g} s{bound})", flush=True
        )
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible test server for Personae")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument(
        "--concurrency-limit",
        type=int,
        default=None,
        help="answer 429 + Retry-After above N requests in flight",
    )
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.host, args.port, args.latency, args.embedding_dim, args.concurrency_limit))


if __name__ == "__main__":
    main()
