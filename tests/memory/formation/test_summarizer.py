"""The summarizer's contract: always shorter than its input, never raising for LLM trouble."""

from __future__ import annotations

import pytest

from memory.formation.summarizer import EXTRACTIVE, ExchangeSummarizer, split_into_chunks, summary_token_cap
from memory.llm import LLMClient
from memory.tokens import count_tokens
from memory.types import ModelConfig
from testkit.llm_server import Drop, LLMTestServer, Stall

EXCHANGE = (
    "Alice: *twirls* guess what!!! 🎉 I adopted a grey cat named Pixel on 2024-02-10 from the shelter on "
    "Baker Street, and she already knocked over my plant lol.\n"
    "Lilith: *raises an eyebrow* Pixel sounds like trouble. Keep the plants on the top shelf, Alice."
)


@pytest.mark.parametrize(("tokens", "cap"), [(1000, 256), (300, 150), (60, 48), (30, 29), (2, 1), (0, 1)])
def test_cap_follows_the_seed_rule_and_stays_below_input(tokens: int, cap: int) -> None:
    assert summary_token_cap(tokens, floor=48, ceiling=256) == cap


def test_chunks_cover_everything_within_the_budget() -> None:
    text = "\n".join(f"Line {i}: the quick brown fox number {i} jumps." for i in range(200))
    chunks = split_into_chunks(text, 100)
    assert all(count_tokens(c) <= 100 for c in chunks)
    assert "\n".join(chunks).split() == text.split()  # nothing dropped, nothing reordered


def test_one_huge_line_is_split_at_words() -> None:
    text = "word " * 5000
    chunks = split_into_chunks(text, 64)
    assert len(chunks) > 1 and all(count_tokens(c) <= 64 for c in chunks)
    assert sum(len(c.split()) for c in chunks) == 5000


@pytest.fixture
def summarizer() -> ExchangeSummarizer:
    llm = LLMClient(max_retries=1, backoff_base=0.01, backoff_max=0.02)
    return ExchangeSummarizer(llm, max_tokens=60, min_tokens=10)


async def test_without_llm_is_extractive_and_shorter(summarizer: ExchangeSummarizer) -> None:
    result = await summarizer.summarize(EXCHANGE, cfg=None)
    assert result.extractive and result.summarizer == EXTRACTIVE
    assert 0 < len(result.text) < len(EXCHANGE)
    assert "🎉" not in result.text


async def test_llm_summary_is_cleaned_and_capped(
    summarizer: ExchangeSummarizer, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda request: 'Summary: "Alice adopted a grey cat named Pixel on 2024-02-10."'
    cfg = ModelConfig(model="openai/s", api_base=llm_server.base_url, api_key="k", timeout=2)
    result = await summarizer.summarize(EXCHANGE, cfg=cfg, prompt="Be brief.", context="Alice: hi")
    assert result.text == "Alice adopted a grey cat named Pixel on 2024-02-10."
    assert result.summarizer == "openai/s"
    request = llm_server.requests[-1]
    assert request["messages"][0]["content"].startswith("Be brief.\n\n")  # then the answer's format
    assert "<context>\n> Alice: hi\n</context>" in request["messages"][1]["content"]
    assert request["max_tokens"] <= 60 + 8


async def test_longer_than_input_answer_is_not_kept(
    summarizer: ExchangeSummarizer, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda request: EXCHANGE + " And much more besides. " * 20
    cfg = ModelConfig(model="openai/s", api_base=llm_server.base_url, api_key="k", timeout=2)
    result = await summarizer.summarize(EXCHANGE, cfg=cfg)
    assert len(result.text) < len(EXCHANGE)


@pytest.mark.parametrize("failure", [Stall(5), Drop()], ids=["stall", "drop"])
async def test_unavailable_llm_falls_back(
    summarizer: ExchangeSummarizer, llm_server: LLMTestServer, failure: object
) -> None:
    llm_server.script(failure, failure)
    cfg = ModelConfig(model="openai/s", api_base=llm_server.base_url, api_key="k", timeout=0.3)
    result = await summarizer.summarize(EXCHANGE, cfg=cfg)
    assert result.extractive
    assert len(result.text) < len(EXCHANGE)
