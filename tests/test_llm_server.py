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


async def test_an_answer_past_max_tokens_is_cut_with_finish_reason_length() -> None:
    """As llama.cpp does: the text stops at max_tokens, and `finish_reason` says why."""
    long = {
        **BODY,
        "max_tokens": 3,
        "messages": [{"role": "user", "content": "One two three four five six."}],
    }
    async with LLMTestServer() as server, aiohttp.ClientSession() as session:

        async def finish_and_text() -> tuple[str, str]:
            async with session.post(f"{server.base_url}/chat/completions", json=long) as response:
                choice = (await response.json())["choices"][0]
                return choice["finish_reason"], choice["message"]["content"]

        assert await finish_and_text() == ("stop", "One two three")  # the echo keeps max_tokens words
        server.responder = lambda request: "One two three four five six seven eight nine ten eleven."
        assert (await finish_and_text())[0] == "stop"  # sent whole unless asked to cut
        server.cut_at_max_tokens = True
        assert await finish_and_text() == ("length", "One two thre")  # 3 tokens of 4 characters
