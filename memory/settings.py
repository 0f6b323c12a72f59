"""The domain's settings, read from the environment (and a `.env` file) only when asked for.

The front doors extend them with their own (bot/settings.py adds Discord's); every settings class is
built through `build_settings`, so a bad value is always one line naming its variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from models.database import asyncpg_url


class SettingsError(Exception):
    """A setting is missing or invalid; the message is one line naming the variable."""


def default_data_dir() -> Path:
    """`./.data` beside the working directory: visible, easy to delete, shared by every process here."""
    return Path.cwd() / ".data"


class Settings(BaseSettings):
    """Every knob of the domain. Field names map to upper-case environment variables."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    database_url: str | None = Field(default=None, description="unset = embedded PostgreSQL")
    # The embedded PostgreSQL stops by itself after this long with no client (0: only `personae db stop`).
    embedded_postgres_idle_minutes: float = Field(default=10.0, ge=0)
    qdrant_url: str | None = Field(default=None, description="unset = embedded Qdrant Edge")
    qdrant_api_key: SecretStr | None = None
    personae_data_dir: Path = Field(default_factory=default_data_dir)

    # LLMs: litellm model strings ("openai/gpt-4o-mini", "ollama/llama3.1", ...). Unset chat model:
    # the bot cannot reply; unset summarizer: memories use the extractive summarizer.
    chat_model: str | None = None
    chat_api_base: str | None = None
    chat_api_key: SecretStr | None = None
    summarizer_model: str | None = None
    summarizer_api_base: str | None = None
    summarizer_api_key: SecretStr | None = None
    llm_timeout: float = Field(default=60.0, gt=0)
    llm_max_retries: int = Field(default=3, ge=0, le=10)
    # The ceiling of calls in flight per provider endpoint: each starts at a few and finds its own level
    # below this (growing while calls succeed, halving on 429/503 or a timeout).
    llm_concurrency_per_provider: int = Field(default=64, ge=1, le=256)
    # Owners may pick plain model strings only from these providers/models (prefix match);
    # anything with its own api base or key must be an admin-made LLM config.
    model_allow_list: list[str] = Field(default_factory=lambda: ["openai/gpt-4o-mini", "ollama/"])

    embedding_model: str = "all-MiniLM-L6-v2"
    embedding_api_base: str | None = None

    # Long-term memory formation.
    summary_max_tokens: int = Field(default=256, ge=16)
    summary_min_tokens: int = Field(default=48, ge=8)
    summarizer_input_tokens: int = Field(default=3000, ge=200)
    min_summarize_tokens: int = Field(default=40, ge=0)
    # Exchanges read, summarized and written together, and the batches summarized while one is
    # written (memory.formation.pipeline; 0: one after the other).
    formation_batch_size: int = Field(default=64, ge=1)
    formation_batches_ahead: int = Field(default=2, ge=0)
    recall_limit: int = Field(default=5, ge=0, le=50)
    # The most one reply may post (characters), however much the model sends: 3 Discord messages.
    reply_max_chars: int = Field(default=6000, ge=200, le=200_000)

    # Context and rolling summaries.
    context_share: float = Field(default=0.75, gt=0, le=1)
    memory_context_share: float = Field(default=0.15, ge=0, le=0.9)
    # How many of the newest messages a lorebook's keys are looked for in, when the book sets no depth.
    lore_scan_depth: int = Field(default=2, ge=0, le=100)
    rolling_summary_threshold_tokens: int = Field(default=1500, ge=1)
    rolling_summary_min_messages: int = Field(default=6, ge=1)
    rolling_summary_max_tokens: int = Field(default=800, ge=50)

    log_level: str = "INFO"

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str | None) -> str | None:
        """Accept the usual postgres:// URLs and use the asyncpg driver for them."""
        return asyncpg_url(value) if value else None

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return value.upper()


SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def build_settings(settings_class: type[SettingsT], **overrides: object) -> SettingsT:
    """Build settings of this class, turning a validation error into one line naming the variable."""
    try:
        return settings_class(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        error = exc.errors()[0]
        variable = str(error["loc"][0]).upper() if error["loc"] else "?"
        message = str(error["msg"]).removeprefix("Value error, ")
        raise SettingsError(f"Invalid setting {variable}: {message}") from None


def load_settings(**overrides: object) -> Settings:
    """The domain's settings from the environment, `overrides` taking precedence."""
    return build_settings(Settings, **overrides)
