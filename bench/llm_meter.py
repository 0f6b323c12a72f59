"""A metering proxy for an OpenAI-compatible model server: every request passed through as it is, the
tokens each chat completion's `usage` reports (the server's own tokenizer) added up.

    async with UsageMeter(server.base_url) as meter:
        cfg = ModelConfig(model=..., api_base=meter.base_url, ...)
        ...
        meter.prompt_tokens, meter.completion_tokens, meter.calls

It listens on 127.0.0.1, so the product still takes the server for a local one (one call at a time at
first). Used by `bench.summaries --real` for the LLM tokens per memory.
"""

from __future__ import annotations

import json
from types import TracebackType

import aiohttp
from aiohttp import web

# Hop-by-hop and length headers: aiohttp sets its own for the body it sends on.
_DROPPED = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}


class UsageMeter:
    """A proxy to `upstream` (an `.../v1` base URL) counting chat completions' tokens."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def reset(self) -> None:
        self.calls = self.prompt_tokens = self.completion_tokens = 0

    async def __aenter__(self) -> UsageMeter:
        # No client timeout of its own: the product's LLM_TIMEOUT is what a slow answer meets.
        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._forward)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._client is not None:
            await self._client.close()

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._client is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        body = await request.read()
        async with self._client.request(
            request.method, f"{self.upstream}{request.rel_url}", data=body, headers=headers
        ) as answer:
            data = await answer.read()
            if request.path.endswith("/chat/completions") and answer.status == 200:
                self._count(data)
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in _DROPPED}
            return web.Response(body=data, status=answer.status, headers=kept)

    def _count(self, data: bytes) -> None:
        """Add a completion's usage (the summarizer's calls are not streamed)."""
        try:
            usage = json.loads(data).get("usage") or {}
        except (ValueError, AttributeError):
            return
        self.calls += 1
        self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage.get("completion_tokens") or 0)
