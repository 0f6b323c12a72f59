"""The adaptive per-provider limit: on its own, and in LLMClient against the test server over HTTP."""

from __future__ import annotations

import asyncio
import logging

import pytest

from memory.concurrency import AdaptiveLimit, Slot
from memory.llm import LLMClient, LLMUnavailableError
from memory.types import ModelConfig
from testkit.llm_server import Fail, LLMTestServer, Reply, Stall


def config(server: LLMTestServer, *, timeout: float = 5.0) -> ModelConfig:
    return ModelConfig(model="openai/test-model", api_base=server.base_url, api_key="test", timeout=timeout)


def messages(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Message number {i} is here."}]


def client(*, ceiling: int, initial: int = 4, max_retries: int = 3) -> LLMClient:
    return LLMClient(
        max_concurrency_per_provider=ceiling,
        initial_concurrency=initial,
        max_retries=max_retries,
        backoff_base=0.01,
        backoff_max=2.0,
    )


def limit_of(llm: LLMClient, server: LLMTestServer) -> AdaptiveLimit:
    return llm.limit_for("openai", server.base_url)


# ----------------------------------------------------------------- the limit on its own


async def test_grows_only_while_the_limit_holds_calls_back() -> None:
    limit = AdaptiveLimit("p", ceiling=10, initial=2)
    for _ in range(5):  # one call at a time never fills two places: no reason to grow
        slot = await limit.acquire()
        slot.succeeded(sample_latency=False)
        slot.release()
    assert limit.level == 2
    first, second = await limit.acquire(), await limit.acquire()
    first.succeeded(sample_latency=False)  # both places in use: slow start adds one
    assert limit.level == 3
    first.release()
    second.release()


async def test_one_cut_per_round_and_never_below_one() -> None:
    limit = AdaptiveLimit("p", ceiling=16, initial=8)
    slots = [await limit.acquire() for _ in range(8)]
    for slot in slots:  # the whole round is refused: halved once, not eight times
        slot.congested("429")
        slot.release()
    assert limit.level == 4
    assert limit.stats().congestion_signals == 8
    assert limit.stats().decreases == 1
    for _ in range(5):
        slot = await limit.acquire()
        slot.congested("429")
        slot.release()
    assert limit.level == 1


async def saturated_round(limit: AdaptiveLimit) -> None:
    """Fill every place, then let each call succeed: the limit grows once per such round."""
    slots = [await limit.acquire() for _ in range(limit.level)]
    for slot in slots:
        slot.succeeded(sample_latency=False)
        slot.release()


async def refuse_after(limit: AdaptiveLimit, accepted: int) -> None:
    """`accepted` calls in flight, then one more the provider refuses at once."""
    slots = [await limit.acquire() for _ in range(accepted + 1)]
    slots[-1].congested("429")
    for slot in slots:
        slot.release()


async def test_a_refused_probe_falls_back_to_what_the_provider_took_not_to_half() -> None:
    limit = AdaptiveLimit("p", ceiling=16, initial=8)
    await refuse_after(limit, accepted=6)  # a provider taking 6: found by a refusal at 7 of 8
    assert limit.level == 4  # below the level it knew was safe: halved
    while limit.level <= 6:  # fast back to 6, then probing above it, a fraction per round
        await saturated_round(limit)
    assert limit.level == 7
    await refuse_after(limit, accepted=6)  # the probe's answer: still 6
    assert limit.level == 6
    assert limit.stats().decreases == 2
    await refuse_after(limit, accepted=2)  # refused at a level it took before: it takes less now
    assert limit.level == 3


async def held_and_queued(limit: AdaptiveLimit) -> tuple[Slot, asyncio.Task[Slot], asyncio.Task[Slot]]:
    """The limit's one place taken, and two calls queued behind it, in order."""
    held = await limit.acquire()
    first, second = asyncio.create_task(limit.acquire()), asyncio.create_task(limit.acquire())
    await asyncio.sleep(0)
    return held, first, second


async def test_a_cancelled_waiter_gives_its_place_on() -> None:
    limit = AdaptiveLimit("p", ceiling=1, initial=1)
    held, waiting, behind = await held_and_queued(limit)
    held.release()  # the place goes to `waiting`, which is cancelled before it runs
    waiting.cancel()
    slot = await asyncio.wait_for(behind, timeout=5)
    assert limit.stats().peak_in_flight == 1
    slot.release()


async def test_a_retry_goes_ahead_of_calls_not_yet_started() -> None:
    limit = AdaptiveLimit("p", ceiling=1, initial=1)
    held, first, second = await held_and_queued(limit)
    retry = asyncio.create_task(limit.acquire(retry=True))
    await asyncio.sleep(0)
    held.release()
    slot = await asyncio.wait_for(retry, timeout=5)
    assert not first.done() and not second.done()
    slot.release()
    slot = await asyncio.wait_for(first, timeout=5)  # the others keep their order
    assert not second.done()
    slot.release()
    (await asyncio.wait_for(second, timeout=5)).release()


# ----------------------------------------------------------------- in LLMClient, over HTTP


async def test_grows_under_success_within_the_ceiling(llm_server: LLMTestServer) -> None:
    llm_server.latency = 0.1
    llm = client(ceiling=12, initial=2)
    replies = await asyncio.gather(*(llm.complete(config(llm_server), messages(i)) for i in range(80)))
    assert replies == [f"Message number {i} is here." for i in range(80)]
    stats = limit_of(llm, llm_server).stats()
    assert stats.peak_level > 2
    assert stats.peak_level <= 12
    assert 2 < llm_server.max_in_flight <= 12


async def test_never_exceeds_the_ceiling(llm_server: LLMTestServer) -> None:
    llm_server.latency = 0.05
    llm = client(ceiling=3, initial=8)
    await asyncio.gather(*(llm.complete(config(llm_server), messages(i)) for i in range(30)))
    assert llm_server.max_in_flight == 3
    assert limit_of(llm, llm_server).stats().peak_level == 3


@pytest.mark.parametrize("status", [429, 503])
async def test_a_refusal_halves_the_limit_and_its_retry_after_is_honoured(
    llm_server: LLMTestServer, status: int
) -> None:
    llm = client(ceiling=16, initial=4)
    delays: list[float] = []

    async def record(delay: float) -> None:
        delays.append(delay)

    llm.retry.sleep = record
    llm_server.script(Fail(status, retry_after=0.75))
    assert await llm.complete(config(llm_server), messages(1)) == "Message number 1 is here."
    assert delays == [0.75]
    assert limit_of(llm, llm_server).level == 2


async def test_a_timeout_cuts_the_limit_but_other_failures_do_not(llm_server: LLMTestServer) -> None:
    llm = client(ceiling=16, initial=8, max_retries=1)
    llm_server.script(Fail(500))
    await llm.complete(config(llm_server), messages(1))
    llm_server.script(Fail(400))
    with pytest.raises(LLMUnavailableError):
        await llm.complete(config(llm_server), messages(2))
    assert limit_of(llm, llm_server).level == 8
    llm_server.script(Stall(2.0))
    await llm.complete(config(llm_server, timeout=0.3), messages(3))
    assert limit_of(llm, llm_server).level == 4


async def test_a_stream_refused_before_its_first_text_cuts_the_limit(llm_server: LLMTestServer) -> None:
    llm = client(ceiling=16, initial=4)
    llm_server.script(Fail(429, retry_after=0.01), Reply("streamed reply"))
    pieces = [piece async for piece in llm.stream(config(llm_server), messages(1))]
    assert "".join(pieces) == "streamed reply"
    assert limit_of(llm, llm_server).level == 2


async def test_a_provider_limit_is_found_and_nothing_is_lost_or_duplicated(
    llm_server: LLMTestServer, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.latency = 0.05
    llm_server.concurrency_limit = 3
    llm_server.limit_retry_after = 0.05
    llm = client(ceiling=32, initial=2, max_retries=10)
    caplog.set_level(logging.INFO, logger="memory.concurrency")
    replies = await asyncio.gather(*(llm.complete(config(llm_server), messages(i)) for i in range(60)))
    # Every call answered once, with its own reply; the refused attempts were retried, none twice.
    assert replies == [f"Message number {i} is here." for i in range(60)]
    answered = sorted(str(r["messages"][0]["content"]) for r in llm_server.requests)
    assert answered == sorted(f"Message number {i} is here." for i in range(60))
    stats = limit_of(llm, llm_server).stats()
    assert llm_server.rejected > 0
    assert stats.congestion_signals == llm_server.rejected
    assert stats.decreases >= 1
    assert stats.level < 32
    assert llm_server.max_in_flight == 3
    assert any("LLM concurrency for openai at" in r.getMessage() for r in caplog.records)


async def test_providers_have_limits_of_their_own(llm_server: LLMTestServer) -> None:
    llm = client(ceiling=16, initial=4)
    async with LLMTestServer() as other:
        llm_server.script(Fail(429, retry_after=0.01))
        await llm.complete(config(llm_server), messages(1))
        await llm.complete(config(other), messages(2))
        assert limit_of(llm, llm_server).level == 2
        assert limit_of(llm, other).level == 4
    assert {s.name for s in llm.concurrency_stats()} == {
        f"openai at {llm_server.base_url}",
        f"openai at {other.base_url}",
    }


async def test_a_refused_call_is_retried_before_the_calls_queued_behind_it(
    llm_server: LLMTestServer,
) -> None:
    # One call at a time: the first is refused (Retry-After 0.1 s) and leaves its place; the next
    # runs meanwhile, and the refused one is retried before the three still waiting, not after them.
    llm_server.latency = 0.2
    llm_server.script(Fail(429, retry_after=0.1))
    llm = client(ceiling=1, initial=1)
    calls = [asyncio.create_task(llm.complete(config(llm_server), messages(i))) for i in range(5)]
    replies = await asyncio.gather(*calls)
    assert replies == [f"Message number {i} is here." for i in range(5)]
    order = [request["messages"][-1]["content"] for request in llm_server.requests]
    assert order == [f"Message number {i} is here." for i in (0, 1, 0, 2, 3, 4)]
