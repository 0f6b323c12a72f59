"""What a personality's fields may hold: its name slug, prompt and avatar limits, memory mode, model.

Checked here once for the slash commands, the command line and the service alike.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Collection
from dataclasses import dataclass

from memory.errors import InvalidInputError
from memory.types import MemoryMode

# A personality's own messages are logged as authored by `personality:NAME`, in a column of 64.
MAX_NAME_LENGTH = 64 - len("personality:")
MAX_DISPLAY_NAME_LENGTH = 80
# One limit for a personality's system prompt, in the service and on the slash options that carry it
# (/personality create and edit). Discord decides it: a slash-command string option holds at most
# 6000 characters, and the prompt is only ever typed into one (a modal's 4000 would be the cap if it
# were edited in a modal); a longer limit would accept prompts from the command line that no Discord
# user could ever edit.
MAX_PROMPT_LENGTH = 6000
# A Discord modal text input holds at most 4000 characters; the summarizer prompt is edited in one.
MAX_SUMMARIZER_PROMPT_LENGTH = 4000
MAX_AVATAR_URL_LENGTH = 500
# A model string as the personality and LLM config columns hold it.
MAX_MODEL_LENGTH = 200
# A user's (or owner's, guild's, channel's) id: a Discord snowflake has at most 20 digits; the columns
# that hold ids, and transcripts' ids, take up to 64 characters.
MAX_ID_LENGTH = 64
# Discord refuses a webhook named with these (any case), so a personality could never answer under
# such a display name (https://discord.com/developers/docs/resources/webhook#create-webhook).
WEBHOOK_REFUSED_WORDS = ("clyde", "discord")
ModelValidator = Callable[[str], None]
DEFAULT_PROMPT = "You are {display_name}. Stay in character, be concise and kind."


def slugify(name: str) -> str:
    """`Lilith the Wise` -> `lilith-the-wise`: the stable name used in commands and URLs."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9_]+", "-", ascii_name.lower()).strip("-_")
    return slug[:MAX_NAME_LENGTH].strip("-_")


def parse_memory_mode(value: str) -> MemoryMode:
    try:
        return MemoryMode(value.strip().lower())
    except ValueError:
        allowed = ", ".join(m.value for m in MemoryMode)
        raise InvalidInputError(f"Unknown memory mode {value!r}; use one of: {allowed}.") from None


def validate_litellm_model(model: str) -> None:
    """Raise LLMConfigError unless litellm knows the model's provider (imports litellm on first use)."""
    from memory.llm import LLMClient

    if len(model) > MAX_MODEL_LENGTH:
        raise InvalidInputError(f"A model string is at most {MAX_MODEL_LENGTH} characters.")
    LLMClient().validate_model(model)


def check_id(value: str | None, what: str) -> str | None:
    """A user, owner, guild or channel id that fits where ids are stored; `what` names it in the error."""
    if value is not None and len(value) > MAX_ID_LENGTH:
        raise InvalidInputError(
            f"{what} is {len(value)} characters; an id is at most {MAX_ID_LENGTH} "
            "(a Discord id has 17 to 20 digits)."
        )
    return value


def validate_avatar_url(url: str | None) -> str | None:
    if url is None or not url.strip():
        return None
    url = url.strip()
    if not re.match(r"^https://[^\s/]+\.[^\s]+$", url) or len(url) > MAX_AVATAR_URL_LENGTH:
        raise InvalidInputError(
            f"The avatar must be an https:// image URL of at most {MAX_AVATAR_URL_LENGTH} characters."
        )
    return url


def name_taken(slug: str) -> InvalidInputError:
    """The error for a personality name already in use."""
    return InvalidInputError(f"A personality named {slug!r} already exists; pick another name.")


def check_display_name(display_name: str) -> str:
    display = display_name.strip()
    if not display or len(display) > MAX_DISPLAY_NAME_LENGTH:
        raise InvalidInputError(f"The display name must be 1 to {MAX_DISPLAY_NAME_LENGTH} characters.")
    return check_webhook_name(display)


def check_webhook_name(display_name: str) -> str:
    """The display name, unless Discord would refuse it as the name its replies are posted under."""
    folded = display_name.casefold()
    refused = [word for word in WEBHOOK_REFUSED_WORDS if word in folded]
    if refused:
        raise InvalidInputError(
            f"Discord refuses to post under a name containing {refused[0]!r}, so {display_name!r} could "
            "never answer: pick another display name."
        )
    return display_name


class LookAlikeNameError(InvalidInputError):
    """A name or display name that reads like another personality's (`look_alike`)."""


def look_alike(candidates: Collection[str], existing: Collection[str]) -> tuple[str, str] | None:
    """The first (candidate, existing name) pair that reads alike: the same letters in any case, or
    letters of other scripts that look the same (Cyrillic `і` for Latin `i`, `0` for `o`), after
    Unicode's confusables list; None when every candidate reads differently."""
    from confusables import is_confusable  # its map of Unicode's confusables loads in ~50 ms

    for candidate in candidates:
        for name in existing:
            if is_confusable(candidate, name):
                return candidate, name
    return None


def check_prompt(prompt: str, limit: int = MAX_PROMPT_LENGTH, *, required: bool = False) -> str:
    if required and not prompt.strip():
        raise InvalidInputError("The prompt can't be empty.")
    if len(prompt) > limit:
        raise InvalidInputError(f"The prompt is {len(prompt)} characters; the limit is {limit}.")
    return prompt


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """What a personality's model setting resolves to: an admin-made config, a plain string, or neither."""

    llm_config_id: int | None
    model: str | None

    @property
    def is_default(self) -> bool:
        return self.llm_config_id is None and self.model is None


DEFAULT_MODEL_WORDS = ("", "default", "none")
