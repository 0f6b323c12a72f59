"""Which model answers and which summarizes, for a personality: the one resolver, defaults in one place.

A personality may name an admin-made LLM config (its own endpoint and key), a plain model string
(served through the deployment's endpoint for that role), or nothing (the deployment's model for
that role, from CHAT_MODEL / SUMMARIZER_MODEL). No deployment model means no chat reply, or
extractive summaries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from memory.settings import Settings
from memory.types import ModelConfig
from models import LLMConfig, Personality

# A chat reply wants some liveliness; a summary wants to stay close to its source.
CHAT_TEMPERATURE = 0.8
CHAT_MAX_TOKENS = 512
SUMMARIZER_TEMPERATURE = 0.2


def model_config_from(config: LLMConfig) -> ModelConfig:
    """An admin-made LLM config as litellm arguments; its key is read from the named variable."""
    key = os.environ.get(config.api_key_env) if config.api_key_env else None
    endpoint = RoleDefaults(
        config.model,
        config.api_base,
        key,
        config.temperature,
        config.max_tokens,
        config.timeout,
        key_setting=config.api_key_env or f"api_key_env of LLM config {config.name!r}",
        model_setting=f"LLM config {config.name!r}",
    )
    return endpoint.config_for(config.model, context_window=config.context_window)


@dataclass(frozen=True, slots=True)
class RoleDefaults:
    """An endpoint and its sampling: the deployment's for one role (`model` None: no deployment model),
    or an admin-made LLM config's."""

    model: str | None
    api_base: str | None
    api_key: str | None
    temperature: float
    max_tokens: int
    timeout: float
    key_setting: str | None = None  # see ModelConfig
    model_setting: str | None = None

    def config(self, model: str | None = None) -> ModelConfig | None:
        """This role's config for `model` (a personality's model string) or the deployment's model."""
        chosen = model or self.model
        return self.config_for(chosen) if chosen else None

    def config_for(self, model: str, *, context_window: int | None = None) -> ModelConfig:
        """`model` called through this endpoint (the one place a ModelConfig is assembled)."""
        return ModelConfig(
            model=model,
            api_base=self.api_base,
            api_key=self.api_key,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            timeout=self.timeout,
            context_window=context_window,
            key_setting=self.key_setting,
            model_setting=self.model_setting,
        )


@dataclass(frozen=True, slots=True)
class ModelConfigResolver:
    """Resolves the chat and summarizer model of a personality (its relationships loaded)."""

    chat_defaults: RoleDefaults
    summarizer_defaults: RoleDefaults

    @classmethod
    def from_settings(cls, settings: Settings) -> ModelConfigResolver:
        """The deployment's defaults, from CHAT_* and SUMMARIZER_* settings."""

        def secret(value: object) -> str | None:
            return value.get_secret_value() if value is not None else None  # type: ignore[attr-defined]

        return cls(
            chat_defaults=RoleDefaults(
                model=settings.chat_model,
                api_base=settings.chat_api_base,
                api_key=secret(settings.chat_api_key),
                temperature=CHAT_TEMPERATURE,
                max_tokens=CHAT_MAX_TOKENS,
                timeout=settings.llm_timeout,
                key_setting="CHAT_API_KEY",
                model_setting="CHAT_MODEL",
            ),
            summarizer_defaults=RoleDefaults(
                model=settings.summarizer_model,
                api_base=settings.summarizer_api_base,
                api_key=secret(settings.summarizer_api_key),
                temperature=SUMMARIZER_TEMPERATURE,
                max_tokens=settings.summary_max_tokens,
                timeout=settings.llm_timeout,
                key_setting="SUMMARIZER_API_KEY",
                model_setting="SUMMARIZER_MODEL",
            ),
        )

    @classmethod
    def none(cls, *, timeout: float = 60.0, summary_max_tokens: int = 256) -> ModelConfigResolver:
        """No deployment models: personalities answer and summarize only through their own choices."""
        return cls(
            chat_defaults=RoleDefaults(None, None, None, CHAT_TEMPERATURE, CHAT_MAX_TOKENS, timeout),
            summarizer_defaults=RoleDefaults(
                None, None, None, SUMMARIZER_TEMPERATURE, summary_max_tokens, timeout
            ),
        )

    @property
    def deployment_chat(self) -> ModelConfig | None:
        return self.chat_defaults.config()

    @property
    def deployment_summarizer(self) -> ModelConfig | None:
        return self.summarizer_defaults.config()

    def chat(self, personality: Personality) -> ModelConfig | None:
        """The personality's chat model: its LLM config, its model string, or the deployment's."""
        if personality.chat_llm_config is not None:
            return model_config_from(personality.chat_llm_config)
        return self.chat_defaults.config(personality.chat_model)

    def summarizer(self, personality: Personality) -> ModelConfig | None:
        """The personality's summarizer: its LLM config, its model string, or the deployment's."""
        if personality.summarizer_llm_config is not None:
            return model_config_from(personality.summarizer_llm_config)
        return self.summarizer_defaults.config(personality.summarizer_model)
