"""What a character card puts in front of the model: the personality's system prompt composed from the
card within MAX_PROMPT_LENGTH, and the parts a chat adds around the history (`CardChat`).

The card's system prompt comes first (or "You are NAME."), then its description, personality and
scenario: together they must fit, or the import is refused with their size. The example dialogues
follow, the first ones that fit; the rest are left out of the prompt (the card keeps them all). The
creator notes never reach the model (the card spec keeps them from it). The greetings, the
post-history instructions and the depth prompt are not part of the stored prompt: a chat puts them
where SillyTavern does (memory.chat.prompt), from `CardChat`.

Macros: `{{char}}` (and `<BOT>`, `<char>`) become the character's nickname (V3), else its name. The
stored prompt, shared by every user, keeps `{{user}}` (`<USER>` written so too): a chat fills it, as the
card's other parts, with the name the user answered chats under (their persona's, else their Discord
display name or the terminal's --name; `fill_chat_macros`).
`{{original}}` is what Personae would have used without the card's field: in its system prompt
"You are NAME.", elsewhere nothing (Personae has no post-history instructions of its own).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from memory.errors import InvalidInputError
from memory.owners.personality_fields import DEFAULT_PROMPT, MAX_PROMPT_LENGTH


class CardText(Protocol):
    """What the prompt is composed from: these fields of a card (memory.owners.cards.CardFields)."""

    @property
    def description(self) -> str: ...
    @property
    def personality(self) -> str: ...
    @property
    def scenario(self) -> str: ...
    @property
    def system_prompt(self) -> str: ...
    @property
    def mes_example(self) -> str: ...
    @property
    def nickname(self) -> str: ...


_CHAR = re.compile(r"\{\{char\}\}|<BOT>|<char>", re.IGNORECASE)
_USER = re.compile(r"\{\{user\}\}|<USER>", re.IGNORECASE)
_ORIGINAL = re.compile(r"\{\{original\}\}", re.IGNORECASE)
_START = re.compile(r"<START>", re.IGNORECASE)
# SillyTavern's default depth for a character's note (`extensions.depth_prompt`) and its roles.
DEFAULT_DEPTH = 4
MAX_DEPTH = 1000
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class ComposedPrompt:
    text: str
    examples: int  # example dialogues on the card
    examples_kept: int  # of them, how many fit in the prompt

    @property
    def examples_left_out(self) -> int:
        return self.examples - self.examples_kept


def fill_macros(text: str, name: str, *, original: str = "") -> str:
    """The card's macros in a prompt every user shares: `name` for the character, `original` for
    `{{original}}`; the user stays `{{user}}`, filled per chat."""
    text = _ORIGINAL.sub(lambda _: original, text)
    text = _CHAR.sub(lambda _: name, text)
    return _USER.sub("{{user}}", text).strip()


def fill_user(text: str, user: str) -> str:
    """A stored prompt's `{{user}}` as the user answered is named in this chat."""
    return _USER.sub(lambda _: user, text)


def fill_chat_macros(text: str, *, char: str, user: str) -> str:
    """The card's macros in a chat: `char` for the character, `user` for the user answered."""
    text = _ORIGINAL.sub("", text)
    text = _CHAR.sub(lambda _: char, text)
    return _USER.sub(lambda _: user, text).strip()


def example_dialogues(mes_example: str, name: str) -> list[str]:
    """The card's example dialogues, one per `<START>` block, macros filled."""
    blocks = (fill_macros(block, name) for block in _START.split(mes_example))
    return [block for block in blocks if block]


def compose_prompt(fields: CardText, name: str, limit: int = MAX_PROMPT_LENGTH) -> ComposedPrompt:
    """The system prompt the card makes for a personality called `name` (its macros: the nickname)."""
    char = fields.nickname.strip() or name
    described = [
        fill_macros(fields.description, char),
        f"{name}'s personality: {fill_macros(fields.personality, char)}"
        if fields.personality.strip()
        else "",
        f"Scenario: {fill_macros(fields.scenario, char)}" if fields.scenario.strip() else "",
    ]
    described = [part for part in described if part]
    opening = fill_macros(fields.system_prompt, char, original=f"You are {name}.")
    if not opening:
        opening = f"You are {name}." if described else DEFAULT_PROMPT.format(display_name=name)
    text = "\n\n".join([opening, *described])
    if len(text) > limit:
        raise InvalidInputError(
            f"The card's system prompt, description, personality and scenario come to {len(text):,} "
            f"characters; a personality's prompt holds at most {limit:,}. Shorten them and import it again."
        )
    examples = example_dialogues(fields.mes_example, char)
    kept: list[str] = []
    header = f"Examples of how {name} talks (their style only, not things that happened):"
    for example in examples:
        candidate = "\n\n".join([text, header, *kept, example])
        if len(candidate) > limit:
            break
        kept.append(example)
    if kept:
        text = "\n\n".join([text, header, *kept])
    return ComposedPrompt(text=text, examples=len(examples), examples_kept=len(kept))


@dataclass(frozen=True)
class DepthPrompt:
    """Text put into the history `depth` messages from its end (0: after the newest), as `role`."""

    text: str
    depth: int
    role: str = "system"


@dataclass(frozen=True)
class CardChat:
    """What a personality's card adds to a chat, as the card wrote it (macros are filled per chat)."""

    char: str  # what `{{char}}` means: the card's nickname, else the personality's display name
    greetings: tuple[str, ...] = ()  # `first_mes`, then `alternate_greetings`
    post_history_instructions: str = ""
    depth_prompt: DepthPrompt | None = None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def depth_of(value: Any, default: int = DEFAULT_DEPTH) -> int:
    """A depth as cards write it (a number, sometimes a numeric string), within 0..MAX_DEPTH."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return max(0, min(MAX_DEPTH, int(value)))


def role_of(value: Any) -> str:
    """A role as cards write it: a name, or SillyTavern's number (0 system, 1 user, 2 assistant)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(ROLES):
        return ROLES[value]
    return value if value in ROLES else "system"


def card_chat(card: Mapping[str, Any] | None, display_name: str) -> CardChat:
    """The chat parts of a personality's stored card (`personalities.card`); empty without a card."""
    card = card or {}
    char = _text(card.get("nickname")).strip() or display_name
    alternates = card.get("alternate_greetings")
    greetings = [_text(card.get("first_mes")), *(alternates if isinstance(alternates, list) else [])]
    extensions = card.get("extensions")
    note = extensions.get("depth_prompt") if isinstance(extensions, Mapping) else None
    depth_prompt = None
    if isinstance(note, Mapping) and _text(note.get("prompt")).strip():
        depth_prompt = DepthPrompt(
            _text(note.get("prompt")), depth_of(note.get("depth")), role_of(note.get("role"))
        )
    return CardChat(
        char=char,
        greetings=tuple(g for g in map(_text, greetings) if g.strip()),
        post_history_instructions=_text(card.get("post_history_instructions")),
        depth_prompt=depth_prompt,
    )
