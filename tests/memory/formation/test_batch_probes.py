"""A model not yet known to answer numbered batches is tried with small probes first: batches sent all
at once to a model that cannot number its answers are all paid before any comes back unparsed, then
every exchange is asked again (issue 30: 136 % of one call per exchange on the roleplay set). A model
that answers a probe gets its full batches; one that fumbled is tried again now and then."""

from __future__ import annotations

import asyncio
from typing import Any

from memory.formation.pace import PROBE_EXCHANGES, REPROBE_EVERY
from memory.formation.summarizer import ExchangeSummarizer, ExchangeText
from memory.llm import LLMClient
from memory.types import ModelConfig
from testkit.llm_server import LLMTestServer, SummarizerModel, exchanges_asked

EXCHANGES = [
    ExchangeText(
        f"Bob: my neighbour Dana lent me {n} chairs for the party on Friday, I owe her a cake\n"
        f"Sage: {n} chairs from Dana, Bob! Bake her the lemon one.",
        (),
        ("Bob", "Sage"),
    )
    for n in range(3, 3 + 24)
]


def _cfg(server: LLMTestServer) -> ModelConfig:
    return ModelConfig(model="openai/s", api_base=server.base_url, api_key="k", timeout=10)


def _sizes(server: LLMTestServer) -> list[int]:
    return [len(exchanges_asked(r)) for r in server.requests]


async def test_a_model_that_cannot_number_pays_one_small_probe_not_every_batch(
    llm_server: LLMTestServer,
) -> None:
    llm_server.responder = SummarizerModel("malformed")  # a paragraph for a batch, fine for one
    summarizer = ExchangeSummarizer(LLMClient(max_retries=0))  # a local server: one call at a time
    results = await summarizer.summarize_exchanges(EXCHANGES, cfg=_cfg(llm_server))
    assert all(r.reason is None for r in results)  # every exchange answered alone, nothing lost
    sizes = _sizes(llm_server)
    # Before: three batches of 8 sent at once, all unparsed, then 24 calls of one.
    assert [n for n in sizes if n > 1] == [PROBE_EXCHANGES]
    assert len(sizes) == 1 + len(EXCHANGES)
    assert summarizer.pace.singles() == ["openai/s"]


async def test_a_few_exchanges_of_a_model_never_seen_to_number_are_asked_one_a_call(
    llm_server: LLMTestServer,
) -> None:
    """A two-user channel's four exchanges: an unparsed probe would cost them a fifth again (SmolLM2
    on bench/data/two_user_channel.jsonl: 1.19x one call per exchange), so none is sent."""
    llm_server.responder = SummarizerModel("malformed")
    summarizer = ExchangeSummarizer(LLMClient(max_retries=0))
    results = await summarizer.summarize_exchanges(EXCHANGES[:4], cfg=_cfg(llm_server))
    assert all(r.reason is None for r in results)
    assert _sizes(llm_server) == [1, 1, 1, 1]
    assert summarizer.pace.singles() == []  # nothing learned of its batches: a larger pass probes


async def test_probes_in_flight_are_no_more_than_the_endpoint_serves(llm_server: LLMTestServer) -> None:
    """Two formation passes at once (eight numbered batches) to an endpoint serving four: at most two
    probes, not 64 exchanges in numbered batches (32 a pass: two probes pay for themselves there)."""
    llm_server.responder = SummarizerModel("malformed")
    summarizer = ExchangeSummarizer(LLMClient(max_retries=0, initial_concurrency=4))
    many = EXCHANGES * 3
    await asyncio.gather(
        *(
            summarizer.summarize_exchanges(many[start : start + 32], cfg=_cfg(llm_server))
            for start in range(0, 64, 32)
        )
    )
    batched = [n for n in _sizes(llm_server) if n > 1]
    assert 1 <= len(batched) <= 2 and set(batched) == {PROBE_EXCHANGES}


async def test_a_model_that_answers_a_probe_gets_full_batches(llm_server: LLMTestServer) -> None:
    llm_server.responder = SummarizerModel("faithful")
    summarizer = ExchangeSummarizer(LLMClient(max_retries=0))
    results = await summarizer.summarize_exchanges(EXCHANGES, cfg=_cfg(llm_server))
    assert all(r.reason is None for r in results)
    # The probe, the rest of its batch, then the other batches whole.
    assert _sizes(llm_server) == [PROBE_EXCHANGES, 8 - PROBE_EXCHANGES, 8, 8]


async def test_a_model_that_fumbled_its_first_batch_is_tried_again_later(llm_server: LLMTestServer) -> None:
    malformed, faithful = SummarizerModel("malformed"), SummarizerModel("faithful")
    calls = 0

    def fumbles_once(request: dict[str, Any]) -> str:
        nonlocal calls
        calls += 1
        return (malformed if calls == 1 else faithful)(request)

    llm_server.responder = fumbles_once
    summarizer = ExchangeSummarizer(LLMClient(max_retries=0))
    many = (EXCHANGES * 8)[: REPROBE_EVERY + 32]
    # A first pass large enough to be probed, then formation's successive batches of 8.
    for start, end in [(0, 32), *((n, n + 8) for n in range(32, len(many), 8))]:
        await summarizer.summarize_exchanges(many[start:end], cfg=_cfg(llm_server))
    sizes = _sizes(llm_server)
    assert sizes[:3] == [PROBE_EXCHANGES, 1, 1]  # unparsed, each asked alone
    # One a call for REPROBE_EVERY exchanges (to the end of the batch that reached it), then a probe
    # that parses, and batches again.
    assert REPROBE_EVERY <= sizes.count(1) - 2 < REPROBE_EVERY + 8
    assert sizes[-4:] == [PROBE_EXCHANGES, 8 - PROBE_EXCHANGES, 8, 8]
    assert summarizer.pace.singles() == []


async def test_a_probe_holds_the_shortest_exchanges_and_answers_come_back_in_order(
    llm_server: LLMTestServer,
) -> None:
    """An unparsed probe is paid for nothing: it is made of the batch's shortest exchanges."""
    llm_server.responder = SummarizerModel("malformed")
    summarizer = ExchangeSummarizer(LLMClient(max_retries=0))
    filler = "We talked a long while about the weather, the long winter and the price of bread. " * 3
    short = {
        2: "Bob: Tom lent me 4 chairs on Friday\nSage: 4 chairs from Tom!",
        5: "Bob: Ann is 7 today\nSage: 7!",
    }
    texts = [  # enough that a probe pays for itself
        short.get(n) or f"Bob: I bought {n} plums in Lisbon. {filler}\nSage: {n} plums!" for n in range(24)
    ]
    results = await summarizer.summarize_exchanges(
        [ExchangeText(text, (), ("Bob", "Sage")) for text in texts], cfg=_cfg(llm_server)
    )
    [probe] = [exchanges_asked(r) for r in llm_server.requests if len(exchanges_asked(r)) > 1]
    assert "Tom lent me 4 chairs" in probe[0] and "Ann is 7 today" in probe[1]
    assert "Tom" in results[2].text and "Ann" in results[5].text
    assert all(f"{n} plums" in results[n].text for n in range(24) if n not in short)
