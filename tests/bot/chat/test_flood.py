"""Flood control: a burst within the limit passes, then one notice per window with the wait."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from bot.chat.flood import FloodControl, flood_notice


def message_from(user_id: int) -> Any:
    return SimpleNamespace(author=SimpleNamespace(id=user_id))


async def test_a_burst_passes_then_the_user_is_told_once_per_window() -> None:
    flood = FloodControl(messages=3, seconds=0.5)
    alice, bob = message_from(1), message_from(2)
    assert [flood.hit(alice) for _ in range(3)] == [None, None, None]
    refused = flood.hit(alice)
    assert refused is not None and refused.notify
    assert refused.retry_after == pytest.approx(0.5, abs=0.1)
    again = flood.hit(alice)
    assert again is not None and not again.notify  # told once, not at every message
    assert flood.hit(bob) is None  # keyed per user
    await asyncio.sleep(0.6)
    assert flood.hit(alice) is None  # a new window


def test_the_notice_names_the_wait() -> None:
    assert flood_notice("Alice", 9.6) == (
        "Alice, you're sending messages a little fast; please wait 10 s before the next one."
    )
