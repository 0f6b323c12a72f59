"""A refused answer is asked again alone while that pays: a model whose retries keep coming back
refused has its refused answers go extractive at once (memory.formation.pace), one in a while still
retried; a model that answers right once told keeps being asked again (issue 30)."""

from __future__ import annotations

import pytest

from memory.formation.pace import RETRIES_REFUSED_IN_A_ROW, RETRY_PROBE_EVERY
from memory.formation.summarizer import STRICT_RULE, ExchangeSummarizer, ExchangeText, FallbackReason
from memory.llm import LLMClient
from memory.types import ModelConfig
from testkit.llm_server import LLMTestServer, SummarizerModel

# Exchanges of one user, each with a name and a number a faithful memory keeps.
EXCHANGES = [
    f"Bob: my neighbour Dana lent me {n} chairs for the party on Friday, I owe her a cake\n"
    f"Sage: {n} chairs from Dana, Bob! Bake her the lemon one."
    for n in range(3, 3 + 12)
]
# Twelve exchanges checked one by one: seconds on a quiet machine, more on a loaded one.
pytestmark = pytest.mark.timeout(180)


def _cfg(server: LLMTestServer) -> ModelConfig:
    return ModelConfig(model="openai/s", api_base=server.base_url, api_key="k", timeout=5)


async def _one_by_one(server: LLMTestServer) -> list[FallbackReason | None]:
    """Each exchange summarized in its own turn, as formation's successive batches are."""
    summarizer = ExchangeSummarizer(LLMClient(max_retries=1, backoff_base=0.01, backoff_max=0.02))
    reasons = []
    for text in EXCHANGES:
        [result] = await summarizer.summarize_exchanges(
            [ExchangeText(text, (), ("Bob", "Sage"))], cfg=_cfg(server)
        )
        reasons.append(result.reason)
    return reasons


def _strict(server: LLMTestServer) -> int:
    return sum(STRICT_RULE in str(r["messages"][0]["content"]) for r in server.requests)


async def test_retries_stop_paying_for_a_model_whose_retries_are_refused(llm_server: LLMTestServer) -> None:
    llm_server.responder = SummarizerModel("invents")  # stubborn: invents even when told strictly
    reasons = await _one_by_one(llm_server)
    assert reasons == [FallbackReason.INVENTED] * len(EXCHANGES)
    # The first few retried, then one probe in RETRY_PROBE_EVERY refused answers, not one each.
    probes = (len(EXCHANGES) - RETRIES_REFUSED_IN_A_ROW) // RETRY_PROBE_EVERY
    assert _strict(llm_server) == RETRIES_REFUSED_IN_A_ROW + probes
    assert len(llm_server.requests) == len(EXCHANGES) + RETRIES_REFUSED_IN_A_ROW + probes


async def test_a_model_that_answers_right_once_told_is_always_asked_again(llm_server: LLMTestServer) -> None:
    llm_server.responder = SummarizerModel("invents", stubborn=False)
    reasons = await _one_by_one(llm_server)
    assert reasons == [None] * len(EXCHANGES)
    assert _strict(llm_server) == len(EXCHANGES)


async def test_a_model_refusing_everything_is_not_asked_each_exchange_again(
    llm_server: LLMTestServer,
) -> None:
    """Its first refused batch is asked again one exchange a call (one exchange may be what it
    refused); once its last answers were all refusals, a refused batch is each exchange's."""
    llm_server.responder = SummarizerModel("refuses")
    summarizer = ExchangeSummarizer(LLMClient(max_retries=1, backoff_base=0.01, backoff_max=0.02))
    # It numbered a batch before (passes of four are asked one a call by a model never seen to).
    summarizer.pace.batch_answered(_cfg(llm_server), parsed=True)
    reasons = []
    for start in range(0, 12, 4):
        batch = [ExchangeText(text, (), ("Bob", "Sage")) for text in EXCHANGES[start : start + 4]]
        reasons += [r.reason for r in await summarizer.summarize_exchanges(batch, cfg=_cfg(llm_server))]
    assert reasons == [FallbackReason.REFUSED] * 12
    # The first batch, refused, then its 4 alone; then one call for each of the other two batches.
    assert len(llm_server.requests) == 1 + 4 + 1 + 1
