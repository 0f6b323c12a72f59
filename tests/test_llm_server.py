"""The test server's own contract where tests and benchmarks lean on it: its concurrency limit."""

from __future__ import annotations

import asyncio

import aiohttp

from testkit.llm_server import LLMTestServer

BODY = {"model": "test-model", "messages": [{"role": "user", "content": "Hello there."}]}


async def test_concurrency_limit_answers_429_with_retry_after() -> None:
    async with LLMTestServer(latency=0.3, concurrency_limit=2, limit_retry_after=1.5) as server:
        async with aiohttp.ClientSession() as session:

            async def post() -> tuple[int, str | None]:
                async with session.post(f"{server.base_url}/chat/completions", json=BODY) as response:
                    await response.read()
                    return response.status, response.headers.get("Retry-After")

            first = [asyncio.create_task(post()) for _ in range(2)]
            # The server has no event for "requests in flight": poll its counter.
            while server.in_flight < 2:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            refused = await post()
            assert refused == (429, "1.5")
            assert [await task for task in first] == [(200, None), (200, None)]
            assert await post() == (200, None)  # room again once the first two were answered
        assert server.rejected == 1
        assert server.max_in_flight == 2
        assert len(server.requests) == 3  # refused requests are counted, not recorded
        server.reset()
        assert server.concurrency_limit is None
        assert server.rejected == 0
