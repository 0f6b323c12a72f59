"""The one model-config resolver: a personality's LLM config, its model string, or the deployment's."""

from __future__ import annotations

import pytest

from memory.owners.model_configs import ModelConfigResolver, model_config_from
from memory.settings import load_settings
from models import LLMConfig, Personality


def _personality(**values: object) -> Personality:
    fields: dict[str, object] = {
        "chat_llm_config": None,
        "chat_model": None,
        "summarizer_llm_config": None,
        "summarizer_model": None,
    }
    fields.update(values)
    return Personality(name="lilith", display_name="Lilith", owner_id="1", **fields)


@pytest.fixture
def resolver() -> ModelConfigResolver:
    return ModelConfigResolver.from_settings(
        load_settings(
            chat_model="openai/deploy-chat",
            chat_api_base="http://chat.local/v1",
            chat_api_key="chat-key",
            summarizer_model="openai/deploy-summary",
            summarizer_api_base="http://summary.local/v1",
            llm_timeout=12.0,
            summary_max_tokens=200,
        )
    )


def test_deployment_models_when_the_personality_names_none(resolver: ModelConfigResolver) -> None:
    chat = resolver.chat(_personality())
    summary = resolver.summarizer(_personality())
    assert chat is not None and summary is not None
    assert (chat.model, chat.api_base, chat.api_key, chat.timeout) == (
        "openai/deploy-chat",
        "http://chat.local/v1",
        "chat-key",
        12.0,
    )
    assert (summary.model, summary.api_base, summary.max_tokens) == (
        "openai/deploy-summary",
        "http://summary.local/v1",
        200,
    )
    assert summary.temperature < chat.temperature


def test_a_model_string_runs_on_the_deployment_endpoint_of_its_role(resolver: ModelConfigResolver) -> None:
    chat = resolver.chat(_personality(chat_model="ollama/llama3.1"))
    summary = resolver.summarizer(_personality(summarizer_model="ollama/qwen"))
    assert chat is not None and (chat.model, chat.api_base) == ("ollama/llama3.1", "http://chat.local/v1")
    assert summary is not None and (summary.model, summary.api_base) == (
        "ollama/qwen",
        "http://summary.local/v1",
    )


def test_an_llm_config_wins_and_reads_its_key_from_the_named_variable(
    resolver: ModelConfigResolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "secret")
    config = LLMConfig(
        name="fast",
        model="openai/own",
        api_base="http://own/v1",
        api_key_env="MY_KEY",
        temperature=0.5,
        max_tokens=99,
        timeout=7.0,
        context_window=4096,
    )
    chosen = resolver.chat(_personality(chat_llm_config=config, chat_model="ignored/model"))
    assert chosen == model_config_from(config)
    assert chosen is not None and (chosen.api_key, chosen.context_window) == ("secret", 4096)


def test_no_deployment_model_means_none() -> None:
    resolver = ModelConfigResolver.none()
    assert resolver.chat(_personality()) is None
    assert resolver.summarizer(_personality()) is None
    assert resolver.deployment_chat is None and resolver.deployment_summarizer is None
    chat = resolver.chat(_personality(chat_model="openai/x"))
    assert chat is not None and chat.model == "openai/x"
