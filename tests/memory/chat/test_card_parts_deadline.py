"""A reply's prompt built in a worker thread with a deadline (issue 33, item 2): past it, the prompt
goes without the card's lore; with no lore to leave out, the reply waits for it (it used to fail with
TimeoutError: on a busy machine, a reply lost for nothing)."""

from __future__ import annotations

from typing import Any

from memory.chat.card_parts import build_context_off_loop
from memory.chat.prompt import ContextBudget, HistoryMessage
from memory.chat.prompt_card import CardParts
from memory.owners.lore import match_lore, read_lorebook


def arguments(card: CardParts | None) -> dict[str, Any]:
    return {
        "system_prompt": "You are Keeper.",
        "user_name": "U",
        "memories": [],
        "summary": None,
        "history": [HistoryMessage(role="user", content="Tell me of the harbor.", author_name="U")],
        "budget": ContextBudget.for_window(
            8000, share=0.8, memory_share=0.2, lore_share=0.2, reply_tokens=100
        ),
        "model": None,
        "card": card,
    }


async def test_past_the_deadline_a_prompt_without_lore_is_waited_for() -> None:
    built = await build_context_off_loop(0, **arguments(None))
    assert built.messages[-1]["content"] == "Tell me of the harbor."


async def test_past_the_deadline_the_prompt_goes_without_the_lore() -> None:
    book = read_lorebook({"character_book": {"entries": [{"keys": ["harbor"], "content": "It froze."}]}})
    lore = match_lore(book, ["the harbor"], default_scan_depth=2, char="Keeper", user="U")
    assert [entry.text for entry in lore] == ["It froze."]
    in_time = await build_context_off_loop(60, **arguments(CardParts(lore=lore)))
    late = await build_context_off_loop(0, **arguments(CardParts(lore=lore)))
    assert in_time.lore_used and "It froze." in in_time.messages[0]["content"]
    assert not late.lore_used and "It froze." not in late.messages[0]["content"]
