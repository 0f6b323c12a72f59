from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError, NotFoundError, PermissionDeniedError
from memory.owners.llm_configs import LLMConfigService


@pytest.fixture
def service(sessionmaker: async_sessionmaker[AsyncSession]) -> LLMConfigService:
    return LLMConfigService(sessionmaker, admin_ids=["900"])


async def test_admins_and_the_cli_manage_configs(service: LLMConfigService) -> None:
    config = await service.add(
        "local",
        model="openai/qwen2.5",
        api_base="http://127.0.0.1:8000/v1",
        api_key_env="LOCAL_KEY",
        actor="900",
    )
    assert (config.name, config.api_key_env, config.max_tokens) == ("local", "LOCAL_KEY", 512)
    await service.add("cheap", model="openai/gpt-4o-mini")  # actor None: the operator at the CLI
    assert [c.name for c in await service.list()] == ["cheap", "local"]
    await service.remove("local", actor="900")
    assert [c.name for c in await service.list()] == ["cheap"]
    with pytest.raises(NotFoundError):
        await service.remove("local")


async def test_non_admins_are_refused(service: LLMConfigService) -> None:
    with pytest.raises(PermissionDeniedError, match="Only bot admins"):
        await service.add("mine", model="openai/gpt-4o-mini", api_base="http://10.0.0.1/v1", actor="101")
    await service.add("cheap", model="openai/gpt-4o-mini")
    with pytest.raises(PermissionDeniedError):
        await service.remove("cheap", actor="101")
    assert [c.name for c in await service.list()] == ["cheap"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "madeup/x"}, "Unknown LLM provider"),
        ({"model": "openai/x", "api_key_env": "sk-abc123"}, "not an environment variable name"),
        ({"model": "openai/x", "api_base": "file:///etc"}, "http"),
        ({"model": "openai/x", "temperature": 3.0}, "temperature"),
        ({"model": "openai/x", "max_tokens": 0}, "Max tokens and the context window must be 1 to"),
        # Values the columns could not hold: each refused in a line, not a database overflow.
        ({"model": "openai/" + "x" * 200}, "at most 200"),
        ({"model": "openai/x", "api_base": "http://h/" + "x" * 500}, "at most 500"),
        ({"model": "openai/x", "max_tokens": 2**31}, "Max tokens"),
        ({"model": "openai/x", "context_window": 2**40}, "context window"),
        ({"model": "openai/x", "timeout": float("inf")}, "timeout"),
        ({"model": "openai/x", "temperature": float("nan")}, "temperature"),
    ],
    ids=[
        "provider",
        "key-not-env",
        "api-base",
        "temperature",
        "max-tokens",
        "long-model",
        "long-api-base",
        "huge-max-tokens",
        "huge-context",
        "endless-timeout",
        "nan-temperature",
    ],
)
async def test_bad_configs_are_explained(
    service: LLMConfigService, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await service.add("bad", **kwargs)  # type: ignore[arg-type]
    assert await service.list() == []


async def test_duplicate_name(service: LLMConfigService) -> None:
    await service.add("cheap", model="openai/gpt-4o-mini")
    with pytest.raises(InvalidInputError, match="already exists"):
        await service.add("cheap", model="openai/gpt-4o-mini")
