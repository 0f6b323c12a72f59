from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError, NotFoundError, PermissionDeniedError
from memory.owners.personalities import PersonalityService
from memory.owners.personality_fields import (
    MAX_PROMPT_LENGTH,
    MAX_SUMMARIZER_PROMPT_LENGTH,
    ModelChoice,
    slugify,
)


@pytest.mark.parametrize(
    ("raw", "slug"),
    [("Lilith", "lilith"), ("Lilith the Wise!", "lilith-the-wise"), ("Zoë", "zoe"), ("  __x__ ", "x")],
)
def test_slugify(raw: str, slug: str) -> None:
    assert slugify(raw) == slug


async def test_create_is_idempotent_and_keeps_existing(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker)
    first, created = await service.create("Lilith", prompt="Be sarcastic.", memory_mode="summarized")
    assert created
    again, created_again = await service.create("lilith", prompt="Different", memory_mode="hybrid")
    assert not created_again
    assert again.id == first.id
    assert (await service.get("LILITH")).system_prompt == "Be sarcastic."
    assert (await service.get("lilith")).memory_mode == "summarized"


async def test_list_and_missing(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    service = PersonalityService(sessionmaker)
    await service.create("Bob")
    await service.create("Alice", display_name="Alice A.")
    assert [p.name for p in await service.list()] == ["alice", "bob"]
    with pytest.raises(NotFoundError, match="personality list"):
        await service.get("nobody")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "!!!"},
        {"name": "ok", "memory_mode": "sometimes"},
        {"name": "ok", "prompt": "x" * (MAX_PROMPT_LENGTH + 1)},
    ],
    ids=["no-slug", "bad-mode", "long-prompt"],
)
async def test_bad_input_is_refused_clearly(
    sessionmaker: async_sessionmaker[AsyncSession], kwargs: dict[str, str]
) -> None:
    service = PersonalityService(sessionmaker)
    name = kwargs.pop("name")
    with pytest.raises(InvalidInputError):
        await service.create(name, **kwargs)  # type: ignore[arg-type]
    assert await service.list() == []


async def test_owner_or_admin_changes_others_are_refused(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker, admin_ids=["900"], model_allow_list=["ollama/"])
    lilith = await service.create_owned("Lilith", owner_id="1", display_name="Lilith", prompt="Be sly.")
    with pytest.raises(PermissionDeniedError):
        await service.edit("lilith", actor="2", prompt="Hacked")
    with pytest.raises(PermissionDeniedError):
        await service.delete("lilith", actor="2")
    with pytest.raises(PermissionDeniedError):
        await service.set_summarizer_prompt("lilith", actor="2", prompt="x")
    edited = await service.edit("lilith", actor="900", display_name="Lilith II")
    assert edited.display_name == "Lilith II"
    assert (await service.get("lilith")).system_prompt == "Be sly."
    await service.delete("lilith", actor="1")
    assert await service.find(lilith.name) is None


async def test_model_choice_configs_allow_list_and_validation(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    from memory.owners.llm_configs import LLMConfigService

    service = PersonalityService(sessionmaker, admin_ids=["900"], model_allow_list=["ollama/"])
    config = await LLMConfigService(sessionmaker).add("house", model="openai/gpt-4o-mini")
    assert await service.resolve_model("house", "1") == ModelChoice(config.id, None)
    assert await service.resolve_model("ollama/llama3.1", "1") == ModelChoice(None, "ollama/llama3.1")
    assert (await service.resolve_model("default", "1")).is_default
    with pytest.raises(PermissionDeniedError, match="config house, model ollama/"):
        await service.resolve_model("openai/gpt-4o", "1")
    assert await service.resolve_model("openai/gpt-4o", "900") == ModelChoice(None, "openai/gpt-4o")
    with pytest.raises(InvalidInputError, match="Unknown LLM provider"):
        await service.resolve_model("madeup/x", "900")


async def test_summarization_and_summarizer_prompt(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    service = PersonalityService(sessionmaker)
    await service.create_owned("Sage", owner_id="1", display_name="Sage", prompt="Calm.")
    personality, previous = await service.set_summarization("sage", actor="1", enabled=True, mode="hybrid")
    assert (personality.memory_mode, previous) == ("hybrid", "verbatim")
    with pytest.raises(InvalidInputError):
        await service.set_summarization("sage", actor="1", enabled=True, mode="verbatim")
    await service.set_summarizer_prompt("sage", actor="1", prompt="Keep names.")
    await service.set_summarizer_prompt("sage", actor="1", prompt="Keep names and dates.")
    assert await service.summarizer_prompt("sage") == "Keep names and dates."
    with pytest.raises(InvalidInputError, match="limit"):
        await service.set_summarizer_prompt(
            "sage", actor="1", prompt="x" * (MAX_SUMMARIZER_PROMPT_LENGTH + 1)
        )
    await service.set_summarizer_prompt("sage", actor="1", prompt="")
    assert await service.summarizer_prompt("sage") is None


async def test_creation_can_be_restricted_and_names_autocomplete(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker, creator_ids=["1"])
    with pytest.raises(PermissionDeniedError, match="restricted"):
        await service.create_owned("Nope", owner_id="2", display_name="Nope", prompt="x")
    await service.create_owned("Lilith", owner_id="1", display_name="Lilith", prompt="x")
    await service.create_owned("Lila", owner_id="1", display_name="Lila", prompt="x")
    with pytest.raises(InvalidInputError, match="already exists"):
        await service.create_owned("lilith", owner_id="1", display_name="Again", prompt="x")
    assert [n for n, _ in await service.names_matching("LIL")] == ["lila", "lilith"]
    assert [n for n, _ in await service.names_matching("lilit")] == ["lilith"]
    assert await service.names_matching("%") == []


async def test_every_committed_change_is_announced(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    service = PersonalityService(sessionmaker)
    changes: list[str] = []
    service.subscribe(lambda: changes.append("changed"))
    await service.create("Lilith")
    await service.create("lilith")  # exists already: nothing changed
    assert changes == ["changed"]
    await service.edit("lilith", actor=None, display_name="Lady Lilith")
    await service.set_summarization("lilith", actor=None, enabled=True)
    await service.set_summarizer_prompt("lilith", actor=None, prompt="Keep names.")
    with pytest.raises(PermissionDeniedError):
        await service.delete("lilith", actor="2")  # refused: nothing changed
    assert len(changes) == 4
    await service.delete("lilith", actor=None)
    assert len(changes) == 5


async def test_a_name_that_reads_like_another_is_refused(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker)
    await service.create("Lilith")
    await service.create("Sage", display_name="Old Sage")
    for name, display in [
        ("L\u0456lith", None),  # a Cyrillic і: the name reads exactly like Lilith
        ("l1lith", None),
        ("Echo", "0ld Sage"),  # a display name reading like another's display name
        ("sаge", None),  # a Cyrillic а, reading like the other's name
    ]:
        with pytest.raises(InvalidInputError, match="reads like the existing personality"):
            await service.create(name, display_name=display)
    assert [p.name for p in await service.list()] == ["lilith", "sage"]
    await service.create("Lila")  # close is not alike
    with pytest.raises(InvalidInputError, match="reads like"):
        await service.edit("lila", actor=None, display_name="LILITH")
    assert (await service.edit("lilith", actor=None, display_name="Lilith")).display_name == "Lilith"


@pytest.mark.parametrize("display", ["Clyde", "my discord helper", "DISCORDIA", "clydesdale"])
async def test_a_name_discord_refuses_for_webhooks_is_refused(
    sessionmaker: async_sessionmaker[AsyncSession], display: str
) -> None:
    service = PersonalityService(sessionmaker)
    with pytest.raises(InvalidInputError, match="Discord refuses to post under a name containing"):
        await service.create(display)
    with pytest.raises(InvalidInputError, match="Discord refuses"):
        await service.create("helper", display_name=display)
    await service.create("helper")
    with pytest.raises(InvalidInputError, match="Discord refuses"):
        await service.edit("helper", actor=None, display_name=display)
    assert (await service.get("helper")).display_name == "helper"


async def test_ids_and_model_strings_that_would_overflow_their_columns_are_refused(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker)
    with pytest.raises(InvalidInputError, match="an id is at most 64"):
        await service.create("Lilith", owner_id="9" * 65)
    with pytest.raises(InvalidInputError, match="at most 200"):
        await service.create("Lilith", model="openai/" + "x" * 200)
    assert await service.list() == []
    # A name long enough to fill the column its messages are authored under is cut to fit it.
    long_one, _ = await service.create("x" * 100)
    assert len(f"personality:{long_one.name}") <= 64


async def test_choose_model_keeps_model_strings_and_llm_configs_apart(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    from memory.owners.llm_configs import LLMConfigService

    service = PersonalityService(sessionmaker)
    config = await LLMConfigService(sessionmaker).add("local", model="openai/test-model")
    assert await service.choose_model(model=None, llm_config=None) is None
    assert await service.choose_model(model="openai/gpt-4o-mini", llm_config=None) == ModelChoice(
        None, "openai/gpt-4o-mini"
    )
    assert await service.choose_model(model=None, llm_config="local") == ModelChoice(config.id, None)
    assert (await service.choose_model(model="default", llm_config=None)) == ModelChoice(None, None)
    with pytest.raises(
        InvalidInputError, match="is an LLM config, not a model string: choose it with --llm-config"
    ):
        await service.choose_model(model="local", llm_config=None)
    with pytest.raises(InvalidInputError, match="Unknown LLM provider"):
        await service.choose_model(model="madeup", llm_config=None)
    with pytest.raises(NotFoundError, match="No LLM config named 'nope'; the LLM configs are: local"):
        await service.choose_model(model=None, llm_config="nope")
    with pytest.raises(InvalidInputError, match="Unknown LLM provider"):
        await service.create("Bob", model="local")  # a model string litellm cannot route


async def test_edit_changes_every_field_at_once_or_none(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    from memory.owners.llm_configs import LLMConfigService

    service = PersonalityService(sessionmaker)
    config = await LLMConfigService(sessionmaker).add("cheap", model="openai/gpt-4o-mini")
    await service.create("Sage")
    with pytest.raises(InvalidInputError, match="Unknown memory mode"):
        await service.edit("sage", actor=None, prompt="Never written.", memory_mode="sometimes")
    assert (await service.get("sage")).system_prompt != "Never written."
    edited = await service.edit(
        "sage",
        actor=None,
        display_name="Sage the Calm",
        prompt="Calm.",
        model=ModelChoice(None, "openai/gpt-4o-mini"),
        memory=False,
        memory_mode="hybrid",
        summarizer_model=ModelChoice(config.id, None),
        summarizer_prompt="Keep names.",
        avatar_url="https://img.example/sage.png",
    )
    assert (edited.display_name, edited.system_prompt, edited.chat_model) == (
        "Sage the Calm",
        "Calm.",
        "openai/gpt-4o-mini",
    )
    assert (edited.memory_enabled, edited.memory_mode, edited.avatar_url) == (
        False,
        "hybrid",
        "https://img.example/sage.png",
    )
    assert edited.summarizer_llm_config is not None and edited.summarizer_llm_config.name == "cheap"
    assert edited.summarizer_prompt is not None and edited.summarizer_prompt.content == "Keep names."
    back = await service.edit("sage", actor=None, memory=True, summarizer_prompt="", avatar_url="")
    assert (back.memory_enabled, back.summarizer_prompt, back.avatar_url) == (True, None, None)
