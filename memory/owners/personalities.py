"""Personalities: create, read, update, delete; the owner rules (personality_permissions.py) apply
here, not in the cogs.

Every change is announced to the listeners given to `subscribe` (the routing directory's cache of
who can be addressed), right after it is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import selectinload

from memory.errors import InvalidInputError, NotFoundError, PermissionDeniedError
from memory.owners.personality_fields import (
    DEFAULT_MODEL_WORDS,
    DEFAULT_PROMPT,
    MAX_DISPLAY_NAME_LENGTH,
    MAX_SUMMARIZER_PROMPT_LENGTH,
    LookAlikeNameError,
    ModelChoice,
    ModelValidator,
    check_display_name,
    check_id,
    check_prompt,
    check_webhook_name,
    look_alike,
    name_taken,
    parse_memory_mode,
    slugify,
    validate_avatar_url,
    validate_litellm_model,
)
from memory.owners.personality_permissions import PersonalityPermissions
from memory.owners.summarizer_prompts import store_summarizer_prompt
from memory.types import MemoryMode
from models import LLMConfig, Personality, SystemPrompt

MAX_PERSONALITIES_PER_OWNER = 25
AUTOCOMPLETE_LIMIT = 25
ChangeListener = Callable[[], None]


class PersonalityService(PersonalityPermissions):
    """Plain-id operations on personalities, each in its own unit of work.

    Only a personality's owner or a bot admin changes it; that rule is checked here so the slash
    commands, the CLI and the tests share it. An actor of None is the operator (the CLI).
    """

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        admin_ids: Sequence[str] = (),
        model_allow_list: Sequence[str] = (),
        creator_ids: Sequence[str] | None = None,
        validate_model: ModelValidator = validate_litellm_model,
        max_per_owner: int = MAX_PERSONALITIES_PER_OWNER,
    ) -> None:
        super().__init__(admin_ids)
        self._sessionmaker = sessionmaker
        self.model_allow_list = tuple(model_allow_list)
        # None: anyone may create personalities; a list restricts creation to those users (and admins).
        self.creator_ids = frozenset(creator_ids) if creator_ids is not None else None
        self._validate_model = validate_model
        self.max_per_owner = max_per_owner
        self._listeners: list[ChangeListener] = []

    def subscribe(self, listener: ChangeListener) -> None:
        """Call `listener` after every committed change to a personality (created, edited, deleted)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    # ----------------------------------------------------------------------- models

    async def resolve_model(self, value: str | None, user_id: str | None) -> ModelChoice:
        """A model setting from a user: an LLM config by name, or a plain model string.

        Plain strings must be on the deployment's allow-list unless an admin sets them; configs
        with their own endpoint or key exist only because an admin made them, so any may be picked.
        """
        if value is None or value.strip().lower() in DEFAULT_MODEL_WORDS:
            return ModelChoice(None, None)
        value = value.strip()
        async with self._sessionmaker() as session:
            config = await session.scalar(select(LLMConfig).where(LLMConfig.name == value))
            config_names = (await session.scalars(select(LLMConfig.name).order_by(LLMConfig.name))).all()
        if config is not None:
            return ModelChoice(config.id, None)
        self._validate_model(value)
        if self.is_admin(user_id) or any(value.startswith(allowed) for allowed in self.model_allow_list):
            return ModelChoice(None, value)
        allowed = [f"config {n}" for n in config_names] + [f"model {m}*" for m in self.model_allow_list]
        choices = ", ".join(allowed) or "nothing yet (ask an admin)"
        raise PermissionDeniedError(f"{value!r} is not allowed here. Use one of: {choices}.")

    async def choose_model(self, *, model: str | None, llm_config: str | None) -> ModelChoice | None:
        """The operator's choice, kept apart as the command line's options are: `model` a litellm model
        string (or "default"), `llm_config` an LLM config's name; None when neither is given.

        A model string litellm cannot route is refused, and so is an LLM config's name given as a
        model (it would fail at the first reply): the error names `--llm-config`.
        """
        if model is not None and llm_config is not None:
            raise InvalidInputError("Give a model or an LLM config, not both.")
        async with self._sessionmaker() as session:
            config_names = (await session.scalars(select(LLMConfig.name).order_by(LLMConfig.name))).all()
        if llm_config is not None:
            config = await self._llm_config(llm_config.strip())
            if config is None:
                known = ", ".join(config_names) or "none yet (`personae llm-config add`)"
                raise NotFoundError(f"No LLM config named {llm_config!r}; the LLM configs are: {known}.")
            return ModelChoice(config.id, None)
        if model is None:
            return None
        model = model.strip()
        if model.lower() in DEFAULT_MODEL_WORDS:
            return ModelChoice(None, None)
        if model in config_names:
            raise InvalidInputError(
                f"{model!r} is an LLM config, not a model string: choose it with --llm-config {model}."
            )
        self._validate_model(model)
        return ModelChoice(None, model)

    async def _llm_config(self, name: str) -> LLMConfig | None:
        async with self._sessionmaker() as session:
            return await session.scalar(select(LLMConfig).where(LLMConfig.name == name))

    async def _check_reads_apart(self, names: list[str], *, other_than: int | None = None) -> None:
        """Refuse names that read like another personality's name or display name (see `look_alike`):
        `Lіlith` with a Cyrillic `і` beside Lilith would let one pass for the other."""
        query = select(Personality.name, Personality.display_name)
        if other_than is not None:
            query = query.where(Personality.id != other_than)
        async with self._sessionmaker() as session:
            rows = (await session.execute(query)).all()
        whose = {written: (name, display) for name, display in rows for written in (name, display)}
        found = look_alike(names, whose)
        if found is not None:
            candidate, existing = found
            name, display = whose[existing]
            raise LookAlikeNameError(
                f"{candidate!r} reads like the existing personality {display!r} (`{name}`): pick a name "
                "that looks different."
            )

    async def create(
        self,
        name: str,
        *,
        display_name: str | None = None,
        prompt: str | None = None,
        model: str | None = None,
        memory_mode: MemoryMode | str = MemoryMode.VERBATIM,
        owner_id: str | None = None,
        avatar_url: str | None = None,
        llm_config_id: int | None = None,
        card: dict[str, Any] | None = None,
    ) -> tuple[Personality, bool]:
        """Create a personality; an existing one of that name is returned unchanged with False.

        Every field is checked first: a model string litellm can route, an owner id that fits, a
        display name Discord lets a webhook post under, and a name that reads apart from the others'.
        """
        slug = slugify(name)
        if not slug:
            raise InvalidInputError(f"{name!r} has no letters or digits to make a name from.")
        display = check_webhook_name((display_name or name).strip()[:MAX_DISPLAY_NAME_LENGTH] or slug)
        system_prompt = prompt if prompt is not None else DEFAULT_PROMPT.format(display_name=display)
        check_prompt(system_prompt)
        mode = parse_memory_mode(str(memory_mode))
        avatar = validate_avatar_url(avatar_url)
        check_id(owner_id, "The owner id")
        if model is not None:
            self._validate_model(model)
        existing = await self.find(slug)
        if existing is not None:
            return existing, False
        await self._check_reads_apart([slug, display])
        personality = Personality(
            name=slug,
            display_name=display,
            system_prompt=system_prompt,
            chat_model=model,
            chat_llm_config_id=llm_config_id,
            memory_mode=mode.value,
            owner_id=owner_id,
            avatar_url=avatar,
            card=card,
        )
        try:
            async with self._sessionmaker.begin() as session:
                session.add(personality)
        except IntegrityError:
            # Another process created it between our look-up and insert: theirs stands.
            found = await self.find(slug)
            if found is None:
                raise
            return found, False
        self._changed()
        return personality, True

    async def find(self, name: str) -> Personality | None:
        async with self._sessionmaker() as session:
            return await session.scalar(select(Personality).where(Personality.name == slugify(name)))

    async def get(self, name: str) -> Personality:
        """The personality called `name`, or a NotFoundError that says how to list them."""
        personality = await self.find(name)
        if personality is None:
            raise NotFoundError(f"No personality named {name!r}; `personae personality list` shows them.")
        return personality

    async def list(self, *, owner_id: str | None = None) -> Sequence[Personality]:
        query = select(Personality).order_by(Personality.name)
        if owner_id is not None:
            query = query.where(Personality.owner_id == owner_id)
        async with self._sessionmaker() as session:
            return (await session.scalars(query)).all()

    async def create_owned(
        self,
        name: str,
        *,
        owner_id: str,
        display_name: str,
        prompt: str,
        model: str | None = None,
        avatar_url: str | None = None,
        card: dict[str, Any] | None = None,
    ) -> Personality:
        """Create a personality owned by a user; a taken name is refused rather than returned."""
        if self.creator_ids is not None and owner_id not in self.creator_ids and not self.is_admin(owner_id):
            raise PermissionDeniedError("Creating personalities is restricted on this bot; ask an admin.")
        check_prompt(prompt, required=True)
        if await self.find(name) is not None:
            raise name_taken(slugify(name))
        if not self.is_admin(owner_id) and len(await self.list(owner_id=owner_id)) >= self.max_per_owner:
            raise InvalidInputError(f"You already own {self.max_per_owner} personalities, the limit.")
        choice = await self.resolve_model(model, owner_id)
        personality, created = await self.create(
            name,
            display_name=display_name,
            prompt=prompt,
            model=choice.model,
            llm_config_id=choice.llm_config_id,
            owner_id=owner_id,
            avatar_url=avatar_url,
            card=card,
        )
        if not created:
            raise name_taken(personality.name)
        return personality

    async def get_detailed(self, name: str) -> Personality:
        """The personality with its LLM configs and summarizer prompt loaded."""
        async with self._sessionmaker() as session:
            personality = await session.scalar(
                select(Personality)
                .where(Personality.name == slugify(name))
                .options(
                    selectinload(Personality.chat_llm_config),
                    selectinload(Personality.summarizer_llm_config),
                    selectinload(Personality.summarizer_prompt),
                )
            )
        if personality is None:
            raise NotFoundError(f"No personality named {name!r}; `/personality list` shows them.")
        return personality

    async def names_matching(
        self, prefix: str, *, limit: int = AUTOCOMPLETE_LIMIT
    ) -> Sequence[tuple[str, str]]:
        """(name, display name) pairs whose name or display name starts with the typed text."""
        typed = prefix.strip().lower()
        slug = slugify(prefix)
        query = select(Personality.name, Personality.display_name)
        if typed:
            matches = func.lower(Personality.display_name).startswith(typed, autoescape=True)
            if slug:
                matches = matches | Personality.name.startswith(slug, autoescape=True)
            query = query.where(matches)
        async with self._sessionmaker() as session:
            rows = (await session.execute(query.order_by(Personality.name).limit(limit))).all()
        return [(n, d) for n, d in rows]

    async def edit(
        self,
        name: str,
        *,
        actor: str | None,
        display_name: str | None = None,
        prompt: str | None = None,
        model: str | ModelChoice | None = None,
        avatar_url: str | None = None,
        memory: bool | None = None,
        memory_mode: MemoryMode | str | None = None,
        summarizer_model: str | ModelChoice | None = None,
        summarizer_prompt: str | None = None,
    ) -> Personality:
        """Change what was given, every field checked before any is written, in one transaction; None
        leaves a field as it is. A model given as text is an LLM config's name or an allowed model
        string, or "default" for the deployment's (`resolve_model`, as the slash commands take it); a
        ModelChoice is one already made (`choose_model`). An empty avatar removes it; an empty
        summarizer prompt goes back to the default."""
        personality = await self.get(name)
        self.require_manager(personality, actor)
        values: dict[str, object] = {}
        if display_name is not None:
            display = check_display_name(display_name)
            await self._check_reads_apart([display], other_than=personality.id)
            values["display_name"] = display
        if prompt is not None:
            values["system_prompt"] = check_prompt(prompt, required=True)
        for role, chosen in (("chat", model), ("summarizer", summarizer_model)):
            if chosen is not None:
                if isinstance(chosen, str):
                    chosen = await self.resolve_model(chosen, actor)
                values[f"{role}_llm_config_id"] = chosen.llm_config_id
                values[f"{role}_model"] = chosen.model
        if avatar_url is not None:
            values["avatar_url"] = validate_avatar_url(avatar_url)
        if memory is not None:
            values["memory_enabled"] = memory
        if memory_mode is not None:
            values["memory_mode"] = parse_memory_mode(str(memory_mode)).value
        if summarizer_prompt is not None:
            check_prompt(summarizer_prompt.strip(), MAX_SUMMARIZER_PROMPT_LENGTH)
        if not values and summarizer_prompt is None:
            raise InvalidInputError("Nothing to change: give at least one field to edit.")
        async with self._sessionmaker.begin() as session:
            row = await session.get(Personality, personality.id, with_for_update=True)
            if row is None:
                raise NotFoundError(f"No personality named {name!r}.")
            for key, value in values.items():
                setattr(row, key, value)
            if summarizer_prompt is not None:
                await store_summarizer_prompt(session, row, summarizer_prompt.strip())
        self._changed()
        return await self.get_detailed(personality.name)

    async def delete(self, name: str, *, actor: str | None) -> Personality:
        """Delete the personality, its conversations and memories (the index is cleaned by the caller)."""
        personality = await self.get(name)
        self.require_manager(personality, actor)
        async with self._sessionmaker.begin() as session:
            await session.execute(delete(Personality).where(Personality.id == personality.id))
            if personality.summarizer_prompt_id is not None:
                await session.execute(
                    delete(SystemPrompt).where(SystemPrompt.id == personality.summarizer_prompt_id)
                )
        self._changed()
        return personality

    async def set_summarization(
        self, name: str, *, actor: str | None, enabled: bool, mode: MemoryMode | str | None = None
    ) -> tuple[Personality, MemoryMode]:
        """Summarize new memories (summarized or hybrid) or store them verbatim; returns the old mode."""
        if enabled:
            new_mode = parse_memory_mode(str(mode)) if mode is not None else MemoryMode.SUMMARIZED
            if new_mode is MemoryMode.VERBATIM:
                raise InvalidInputError("With summarization on, the mode is summarized or hybrid.")
        else:
            new_mode = MemoryMode.VERBATIM
        previous = MemoryMode((await self.get(name)).memory_mode)
        return await self.edit(name, actor=actor, memory_mode=new_mode), previous

    async def set_summarizer_model(self, name: str, *, actor: str | None, model: str | None) -> Personality:
        """An LLM config by name, an allowed model string, or "default" for the deployment's."""
        return await self.edit(name, actor=actor, summarizer_model=model or "default")

    async def summarizer_prompt(self, name: str) -> str | None:
        """The personality's own summarizer prompt, None when it uses the default."""
        personality = await self.get_detailed(name)
        return personality.summarizer_prompt.content if personality.summarizer_prompt else None

    async def set_summarizer_prompt(self, name: str, *, actor: str | None, prompt: str) -> Personality:
        """Store the personality's summarizer prompt; an empty one goes back to the default."""
        return await self.edit(name, actor=actor, summarizer_prompt=prompt)
