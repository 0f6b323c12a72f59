"""The personality the chat service's tests talk to (a test module may bring its own)."""

from __future__ import annotations

from typing import Any

import pytest

from models import Personality


@pytest.fixture
async def lilith(runtime: Any) -> Personality:
    personality, _ = await runtime.personalities.create("Lilith", prompt="You are Lilith, a librarian.")
    return personality
