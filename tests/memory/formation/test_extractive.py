"""The extractive summarizer: fact-dense sentences, in order, within a token budget."""

from __future__ import annotations

import pytest

from memory.formation.cleaning import strip_roleplay_formatting
from memory.formation.extractive import extractive_summary
from memory.tokens import count_tokens

# --- extractive_summary -----------------------------------------------------------------------------

LONG_EXCHANGE = (
    "Alice: hi there. "
    + " ".join(f"I was just thinking about nothing much at all, really, part {i}." for i in range(20))
    + " My sister Carol moved to Lisbon on 2024-03-15.\nLilith: Oh, that's wonderful news. Bye!"
)


def test_within_budget_returns_the_cleaned_text() -> None:
    assert extractive_summary("*waves* Hello Alice!!! 😀", 100) == "Hello Alice!"


def test_over_budget_is_shorter_and_within_budget() -> None:
    cleaned = strip_roleplay_formatting(LONG_EXCHANGE)
    for budget in (1, 2, 5, 10, 20, 40, 80, 160):
        summary = extractive_summary(LONG_EXCHANGE, budget)
        assert summary
        assert len(summary) < len(cleaned)
        assert count_tokens(summary) <= budget


def test_keeps_the_fact_dense_sentence() -> None:
    summary = extractive_summary(LONG_EXCHANGE, 30)
    assert "Carol moved to Lisbon on 2024-03-15." in summary


def test_keeps_sentences_in_original_order() -> None:
    summary = extractive_summary(LONG_EXCHANGE, 60)
    sentences = [s for s in summary.replace("\n", " ").split(". ") if s]
    positions = [LONG_EXCHANGE.index(s.rstrip(".")) for s in sentences]
    assert positions == sorted(positions)


def test_extractive_summary_is_deterministic() -> None:
    assert extractive_summary(LONG_EXCHANGE, 25) == extractive_summary(LONG_EXCHANGE, 25)


def test_one_long_sentence_is_cut_at_a_word() -> None:
    text = "Alice walked along the river with her old dog Rex and talked about the summer in Lisbon"
    summary = extractive_summary(text, 5)
    assert summary == "Alice walked along the river"


@pytest.mark.parametrize(
    ("text", "budget"),
    [("internationalization", 1), ("... hello world", 1), ("hello world", 0), ("hello world", -5)],
)
def test_tiny_budgets_still_give_something_shorter(text: str, budget: int) -> None:
    summary = extractive_summary(text, budget)
    assert summary
    assert len(summary) < len(text)


def test_extractive_summary_cleans_template_tokens_and_noise() -> None:
    summary = extractive_summary("<|im_start|>user\n*waves* Hi Bob lol<|im_end|>", 50)
    assert summary == "Hi Bob"


@pytest.mark.parametrize("text", ["", "   ", "😀 *waves* lol", "<|im_end|>"])
def test_extractive_summary_of_noise_is_empty(text: str) -> None:
    assert extractive_summary(text, 10) == ""


def test_extractive_summary_of_a_megabyte_completes() -> None:
    text = LONG_EXCHANGE * (1_000_000 // len(LONG_EXCHANGE))
    summary = extractive_summary(text, 200)
    assert summary
    assert count_tokens(summary) <= 200
