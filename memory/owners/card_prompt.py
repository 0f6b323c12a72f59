"""A personality's system prompt composed from a character card, within MAX_PROMPT_LENGTH.

The card's system prompt comes first (or "You are NAME."), then its description, personality and
scenario: together they must fit, or the import is refused with their size. The example dialogues
follow, the first ones that fit; the rest are left out of the prompt (the card keeps them all).
The first message, alternate greetings, creator notes and post-history instructions are not part of
the prompt: the card spec keeps creator notes from the model, and the others belong to a chat front-end.

Macros: `{{char}}` (and V1's `<BOT>`) become the character's name; `{{user}}` (`<USER>`) becomes "the
user" ("The user" opening a sentence, "User" naming the speaker of an example line); `{{original}}`
in the card's system prompt becomes Personae's default prompt, as SillyTavern puts its own main
prompt there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

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


_CHAR = re.compile(r"\{\{char\}\}|<BOT>", re.IGNORECASE)
_USER_SPEAKING = re.compile(r"^([ \t]*)(?:\{\{user\}\}|<USER>):", re.IGNORECASE | re.MULTILINE)
_USER_OPENING = re.compile(r"(^|[.!?][ \t]+)(?:\{\{user\}\}|<USER>)", re.IGNORECASE | re.MULTILINE)
_USER = re.compile(r"\{\{user\}\}|<USER>", re.IGNORECASE)
_ORIGINAL = re.compile(r"\{\{original\}\}", re.IGNORECASE)
_START = re.compile(r"<START>", re.IGNORECASE)


@dataclass(frozen=True)
class ComposedPrompt:
    text: str
    examples: int  # example dialogues on the card
    examples_kept: int  # of them, how many fit in the prompt

    @property
    def examples_left_out(self) -> int:
        return self.examples - self.examples_kept


def fill_macros(text: str, name: str) -> str:
    """The card's macros replaced: the character's name, the user, Personae's default prompt."""
    text = _ORIGINAL.sub(lambda _: DEFAULT_PROMPT.format(display_name=name), text)
    text = _CHAR.sub(lambda _: name, text)
    text = _USER_SPEAKING.sub(lambda m: f"{m.group(1)}User:", text)
    text = _USER_OPENING.sub(lambda m: f"{m.group(1)}The user", text)
    return _USER.sub("the user", text).strip()


def example_dialogues(mes_example: str, name: str) -> list[str]:
    """The card's example dialogues, one per `<START>` block, macros filled."""
    blocks = (fill_macros(block, name) for block in _START.split(mes_example))
    return [block for block in blocks if block]


def compose_prompt(fields: CardText, name: str, limit: int = MAX_PROMPT_LENGTH) -> ComposedPrompt:
    """The system prompt the card makes for a personality called `name`."""
    described = [
        fill_macros(fields.description, name),
        f"{name}'s personality: {fill_macros(fields.personality, name)}"
        if fields.personality.strip()
        else "",
        f"Scenario: {fill_macros(fields.scenario, name)}" if fields.scenario.strip() else "",
    ]
    described = [part for part in described if part]
    opening = fill_macros(fields.system_prompt, name)
    if not opening:
        opening = f"You are {name}." if described else DEFAULT_PROMPT.format(display_name=name)
    text = "\n\n".join([opening, *described])
    if len(text) > limit:
        raise InvalidInputError(
            f"The card's system prompt, description, personality and scenario come to {len(text):,} "
            f"characters; a personality's prompt holds at most {limit:,}. Shorten them and import it again."
        )
    examples = example_dialogues(fields.mes_example, name)
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
