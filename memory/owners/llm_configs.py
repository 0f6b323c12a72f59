"""LLM configs: named model endpoints, made only by bot admins (they cost money and reach networks)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError, NotFoundError, PermissionDeniedError
from memory.owners.personality_fields import ModelValidator, validate_litellm_model
from models import LLMConfig

MAX_CONFIG_NAME_LENGTH = 100
MAX_API_BASE_LENGTH = 500
# Far above any model's (tokens) and any sane wait (seconds), and within the integer columns.
MAX_TOKENS_SETTING = 10_000_000
MAX_TIMEOUT_SECONDS = 3600.0
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,99}$")


class LLMConfigService:
    """Admin-only CRUD; an actor of None is the operator at the command line."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        admin_ids: Sequence[str] = (),
        validate_model: ModelValidator = validate_litellm_model,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._admin_ids = frozenset(admin_ids)
        self._validate_model = validate_model

    def _require_admin(self, actor: str | None) -> None:
        if actor is not None and actor not in self._admin_ids:
            raise PermissionDeniedError("Only bot admins can manage LLM configs.")

    async def add(
        self,
        name: str,
        *,
        model: str,
        actor: str | None = None,
        api_base: str | None = None,
        api_key_env: str | None = None,
        temperature: float = 0.7,
        max_tokens: int = 512,
        timeout: float = 60.0,  # noqa: ASYNC109 (a stored setting for calls, not this call)
        context_window: int | None = None,
    ) -> LLMConfig:
        """Create a named config after checking every field; the key stays in the named variable."""
        self._require_admin(actor)
        name = name.strip()
        if not name or len(name) > MAX_CONFIG_NAME_LENGTH or any(c.isspace() for c in name):
            raise InvalidInputError(f"A config name is 1 to {MAX_CONFIG_NAME_LENGTH} characters, no spaces.")
        self._validate_model(model)
        if api_base is not None and (
            not re.match(r"^https?://\S+$", api_base) or len(api_base) > MAX_API_BASE_LENGTH
        ):
            raise InvalidInputError(
                f"The api base must be an http(s):// URL of at most {MAX_API_BASE_LENGTH} characters."
            )
        if api_key_env is not None and not _ENV_NAME.match(api_key_env):
            raise InvalidInputError(
                f"{api_key_env!r} is not an environment variable name (e.g. OPENROUTER_API_KEY); "
                "the key itself never goes in the database."
            )
        if not 0 <= temperature <= 2:
            raise InvalidInputError("The temperature must be between 0 and 2.")
        tokens = [max_tokens] if context_window is None else [max_tokens, context_window]
        if not all(0 < n <= MAX_TOKENS_SETTING for n in tokens):
            raise InvalidInputError(f"Max tokens and the context window must be 1 to {MAX_TOKENS_SETTING:,}.")
        if not 0 < timeout <= MAX_TIMEOUT_SECONDS:
            raise InvalidInputError(f"The timeout must be over 0 and at most {MAX_TIMEOUT_SECONDS:.0f} s.")
        config = LLMConfig(
            name=name,
            model=model,
            api_base=api_base,
            api_key_env=api_key_env,
            temperature=temperature,
            max_tokens=max_tokens,
            timeout=timeout,
            context_window=context_window,
        )
        try:
            async with self._sessionmaker.begin() as session:
                session.add(config)
        except IntegrityError:
            raise InvalidInputError(f"An LLM config named {name!r} already exists.") from None
        return config

    async def list(self) -> Sequence[LLMConfig]:
        async with self._sessionmaker() as session:
            return (await session.scalars(select(LLMConfig).order_by(LLMConfig.name))).all()

    async def remove(self, name: str, *, actor: str | None = None) -> None:
        """Delete the config; personalities using it fall back to the deployment default."""
        self._require_admin(actor)
        async with self._sessionmaker.begin() as session:
            removed = await session.scalar(
                delete(LLMConfig).where(LLMConfig.name == name).returning(LLMConfig.id)
            )
        if removed is None:
            raise NotFoundError(f"No LLM config named {name!r}.")
