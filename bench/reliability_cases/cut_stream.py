"""An OpenAI-compatible endpoint whose streamed replies can be cut mid-way: the one fault the LLM test
server (testkit.llm_server) cannot play, since its Drop closes the connection before any byte."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

CUT_MARKER = "CUT-HERE"


class CutStreamServer:
    """An OpenAI-compatible endpoint whose streamed reply stops mid-way when the last user message
    holds CUT_MARKER (two chunks, then the connection is cut); other requests get a whole reply."""

    def __init__(self) -> None:
        self.cuts = 0
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> CutStreamServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        last = next((m for m in reversed(body["messages"]) if m["role"] == "user"), {"content": ""})
        cut = CUT_MARKER in str(last["content"])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        pieces = ["Let me ", "tell you ", "about the ", "piano."] if cut else ["All good ", "now."]
        for index, piece in enumerate(pieces):
            if cut and index == 2:
                self.cuts += 1
                if request.transport is not None:
                    request.transport.abort()
                raise asyncio.CancelledError
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": body["model"]}
            chunk["choices"] = [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
