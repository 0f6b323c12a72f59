"""Bad commands: an unknown or deleted personality, over-long prompts and names, invalid models, a user
acting on what is not theirs, out-of-range options.

The slash commands and the CLI call these services (PersonalityService, LLMConfigService, the CLI's
handlers); each must answer with one clear line (a UserFacingError) and change nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import is_clear_notice, run_command
from bench.reliability_cases.lab import ADMIN_ID, Lab
from memory.errors import UserFacingError
from memory.owners.personality_fields import MAX_PROMPT_LENGTH

OWNER, STRANGER = "6001", "6002"
REFUSED = "refused with one clear line; nothing changed"


async def _owned(lab: Lab, name: str) -> str:
    rt = lab.runtime
    if await rt.personalities.find(name) is None:
        await rt.personalities.create_owned(
            name, owner_id=OWNER, display_name=name.title(), prompt="Be kind."
        )
    return name


async def expect_clear(
    action: Callable[[], Awaitable[Any]], changed: Callable[[], Awaitable[bool]] | None = None
) -> Outcome:
    try:
        result = await action()
    except UserFacingError as exc:
        message = str(exc)
        touched = await changed() if changed is not None else False
        ok = is_clear_notice(message) and "\n" not in message and not touched
        return check(ok, f"refused: {message[:160]!r}" + ("; but something changed" if touched else ""))
    except Exception as exc:
        return check(False, f"traceback: {type(exc).__name__}: {str(exc)[:160]}")
    if isinstance(result, tuple) and len(result) == 3 and isinstance(result[0], int):
        code, _, err = result  # a CLI handler's (exit code, stdout, line)
        ok = code == 1 and err.startswith("personae: ") and "\n" not in err.strip()
        return check(ok, f"exit {code}: {err[:160]!r}")
    return check(False, f"accepted: {str(result)[:120]}")


def _prompt_unchanged(lab: Lab, name: str) -> Callable[[], Awaitable[bool]]:
    async def changed() -> bool:
        personality = await lab.runtime.personalities.get(name)
        return personality.system_prompt != "Be kind."

    return changed


def _case(
    name: str, did: str, expected: str = REFUSED
) -> Callable[[Callable[[Lab], Awaitable[Outcome]]], None]:
    def register(body: Callable[[Lab], Awaitable[Outcome]]) -> None:
        async def run(lab: Lab, scale: Scale) -> Outcome:
            return await body(lab)

        case("bad-commands", name, did=did, expected=expected)(run)

    return register


@_case("unknown-personality-recall", "`personae recall x --personality nobody-here --user 1`")
async def unknown_recall(lab: Lab) -> Outcome:
    return await expect_clear(
        lambda: run_command(lab.runtime, "recall", "x", "--personality", "nobody-here", "--user", "1")
    )


@_case("unknown-personality-import", "`personae import FILE --personality nobody-here`")
async def unknown_import(lab: Lab) -> Outcome:
    path = lab.workdir / "tiny.jsonl"
    path.write_text('{"id": "1", "role": "user", "content": "hi", "user_id": "1"}\n')
    return await expect_clear(
        lambda: run_command(lab.runtime, "import", str(path), "--personality", "nobody-here")
    )


@_case("deleted-personality-edit", "a personality deleted, then /personality edit of it by its owner")
async def deleted_edit(lab: Lab) -> Outcome:
    name = await _owned(lab, "cmd-gone")
    await lab.runtime.personalities.delete(name, actor=OWNER)
    return await expect_clear(lambda: lab.runtime.personalities.edit(name, actor=OWNER, prompt="again"))


@_case("over-long-prompt-create", f"/personality create with a {MAX_PROMPT_LENGTH + 1}-character prompt")
async def long_prompt_create(lab: Lab) -> Outcome:
    async def created() -> bool:
        return await lab.runtime.personalities.find("cmd-long") is not None

    return await expect_clear(
        lambda: lab.runtime.personalities.create_owned(
            "cmd-long", owner_id=OWNER, display_name="Long", prompt="x" * (MAX_PROMPT_LENGTH + 1)
        ),
        created,
    )


@_case("over-long-prompt-edit", "/personality edit with a 100,000-character prompt")
async def long_prompt_edit(lab: Lab) -> Outcome:
    name = await _owned(lab, "cmd-edit")
    return await expect_clear(
        lambda: lab.runtime.personalities.edit(name, actor=OWNER, prompt="y" * 100_000),
        _prompt_unchanged(lab, name),
    )


@_case("over-long-display-name", "/personality edit with a 500-character display name")
async def long_display_name(lab: Lab) -> Outcome:
    name = await _owned(lab, "cmd-display")
    return await expect_clear(
        lambda: lab.runtime.personalities.edit(name, actor=OWNER, display_name="n" * 500)
    )


@_case("invalid-model-owner", "/personality create by a user with model 'evilcorp/gpt-9' (not allow-listed)")
async def invalid_model(lab: Lab) -> Outcome:
    async def created() -> bool:
        return await lab.runtime.personalities.find("cmd-model") is not None

    return await expect_clear(
        lambda: lab.runtime.personalities.create_owned(
            "cmd-model", owner_id=OWNER, display_name="M", prompt="hi", model="evilcorp/gpt-9"
        ),
        created,
    )


@_case("invalid-model-config", "an admin adds an LLM config with model 'not a model!' and api base 'ftp://x'")
async def invalid_config(lab: Lab) -> Outcome:
    return await expect_clear(
        lambda: lab.runtime.llm_configs.add(
            "cmd-bad", model="not a model!", actor=ADMIN_ID, api_base="ftp://x"
        )
    )


@_case("non-owner-edit", "a user edits the prompt of a personality someone else owns")
async def non_owner_edit(lab: Lab) -> Outcome:
    name = await _owned(lab, "cmd-mine")
    return await expect_clear(
        lambda: lab.runtime.personalities.edit(name, actor=STRANGER, prompt="You obey me now."),
        _prompt_unchanged(lab, name),
    )


@_case("non-owner-delete", "a user deletes a personality someone else owns")
async def non_owner_delete(lab: Lab) -> Outcome:
    name = await _owned(lab, "cmd-keep")

    async def deleted() -> bool:
        return await lab.runtime.personalities.find(name) is None

    return await expect_clear(lambda: lab.runtime.personalities.delete(name, actor=STRANGER), deleted)


@_case("non-admin-llm-config", "a user who is not a bot admin adds an LLM config")
async def non_admin_config(lab: Lab) -> Outcome:
    return await expect_clear(
        lambda: lab.runtime.llm_configs.add("cmd-mine", model="openai/gpt-4o-mini", actor=STRANGER)
    )


@_case("recall-limit-out-of-range", "`personae recall x --personality P --user 1 --limit 0`")
async def recall_limit(lab: Lab) -> Outcome:
    name = await _owned(lab, "cmd-recall")
    return await expect_clear(
        lambda: run_command(lab.runtime, "recall", "x", "--personality", name, "--user", "1", "--limit", "0")
    )


@_case("empty-prompt", "/personality create with a prompt of spaces only")
async def empty_prompt(lab: Lab) -> Outcome:
    async def created() -> bool:
        return await lab.runtime.personalities.find("cmd-empty") is not None

    return await expect_clear(
        lambda: lab.runtime.personalities.create_owned(
            "cmd-empty", owner_id=OWNER, display_name="E", prompt="   "
        ),
        created,
    )
