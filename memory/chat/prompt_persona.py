"""Who the user is, in the prompt: their persona (name, pronouns, what they say about themselves) and
the names of the others speaking in a shared channel, fitted within the persona's share of the budget
(memory.chat.prompt places it in the system message)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory.formation.cleaning import strip_chat_template_tokens
from memory.tokens import count_tokens, truncate_to_tokens

PERSONA_HEADER = "Who you are talking to, as they describe themselves:"
OTHERS_HEADER = "Others in this conversation:"
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class PromptPersona:
    """A user's persona as the prompt shows it: `speaker` is the name their messages carry here."""

    speaker: str
    name: str
    pronouns: str | None = None
    about: str | None = None

    def introduction(self) -> str:
        """`Name (pronouns)`, and the name they speak under when it differs."""
        text = _clean(self.name) + (f" ({_clean(self.pronouns)})" if self.pronouns else "")
        if _clean(self.speaker) != _clean(self.name):
            text += f", who writes here as {_clean(self.speaker)}"
        return text


def _clean(text: str | None) -> str:
    return " ".join(strip_chat_template_tokens(text or "").split())


def _persona_block(persona: PromptPersona, others: Sequence[PromptPersona], about: str | None) -> str:
    block = f"\n\n{PERSONA_HEADER}\n{persona.introduction()}."
    if about:
        block += f"\nAbout them: {about}"
    if others:
        block += f"\n{OTHERS_HEADER} " + "; ".join(o.introduction() for o in others) + "."
    return block


def fit_persona(
    persona: PromptPersona,
    others: Sequence[PromptPersona],
    room: int,
    tokens_added: Callable[[str], int],
) -> str:
    """The persona block within `room` tokens: other speakers are left out first (the newest kept),
    then the "about" text is cut at a word; without room for the name itself, nothing."""
    full = about = _clean(persona.about)
    others = list(others)
    while others and tokens_added(_persona_block(persona, others, about)) > room:
        others.pop()
    block = _persona_block(persona, others, about)
    over = tokens_added(block) - room
    keep = count_tokens(full)
    while over > 0 and about:
        # Cut by what is over (at least a token), then measure again: the cut counts with one tokenizer.
        keep -= max(1, over)
        cut = truncate_to_tokens(full, keep) if keep > 0 else ""
        about = cut + ELLIPSIS if cut else ""
        block = _persona_block(persona, others, about)
        over = tokens_added(block) - room
    return block if over <= 0 else ""
