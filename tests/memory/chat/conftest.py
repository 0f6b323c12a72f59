"""The personality the chat service's tests talk to (a test module may bring its own)."""

from __future__ import annotations

import pytest

from bot.runtime import Runtime
from models import Personality


@pytest.fixture
async def lilith(runtime: Runtime) -> Personality:
    personality, _ = await runtime.personalities.create("Lilith", prompt="You are Lilith, a librarian.")
    return personality
