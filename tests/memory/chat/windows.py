"""A personality answering through an LLM config of its own with a small context window, for tests of
what fits in the prompt."""

from __future__ import annotations

import pytest

from bot.runtime import Runtime
from models import LLMConfig, Personality
from testkit.llm_server import LLMTestServer

KEY_VARIABLE = "PERSONAE_TEST_KEY"


async def use_small_window(
    runtime: Runtime,
    personality: Personality,
    llm_server: LLMTestServer,
    monkeypatch: pytest.MonkeyPatch,
    *,
    window: int,
) -> None:
    """Give the personality a chat config on the test server with this context window (64-token replies)."""
    monkeypatch.setenv(KEY_VARIABLE, "test")
    async with runtime.sessionmaker.begin() as session:
        config = LLMConfig(
            name=f"window-{window}",
            model="openai/test-chat",
            api_base=llm_server.base_url,
            api_key_env=KEY_VARIABLE,
            temperature=0.5,
            max_tokens=64,
            timeout=5.0,
            context_window=window,
        )
        session.add(config)
        await session.flush()
        row = await session.get(Personality, personality.id)
        assert row is not None
        row.chat_llm_config_id = config.id
