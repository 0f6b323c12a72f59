"""Build a chat prompt inside a token budget: system prompt with the personality's lore, who the user is
(their persona), memories, rolling summary, recent messages, and around them what the character card
adds (its depth prompt and lore at a depth of the history, its post-history instructions last).

Tokens are counted with the chat model's tokenizer (memory.tokens, the one counter), never estimated
from characters. Each message is counted once on its own; the sum
of per-message counts is an upper bound of the count of the whole list (the tokenizer's per-call
priming is paid once per call), so a prompt assembled from them never exceeds the budget. The final
prompt is counted once more as a whole and that figure is what the result reports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory.formation.cleaning import strip_chat_template_tokens
from memory.owners.card_prompt import DepthPrompt, card_chat, fill_chat_macros
from memory.owners.lore import ActiveLore, Position, match_lore, read_lorebook
from memory.tokens import count_message_tokens, count_tokens, truncate_to_tokens

log = logging.getLogger(__name__)

MEMORY_HEADER = "What you remember about {user} from earlier talks, dated (if two disagree, the newer holds):"
SUMMARY_HEADER = "Summary of this conversation so far:"
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


@dataclass(frozen=True, slots=True)
class HistoryMessage:
    """A stored message as the prompt sees it."""

    role: str  # "user" | "assistant"
    content: str
    author_name: str | None = None
    token_count: int = 0  # counted with the chat model when stored; 0 = count now


@dataclass(frozen=True, slots=True)
class ContextBudget:
    total: int
    memories: int
    persona: int = 0
    lore: int = 0

    @classmethod
    def for_window(
        cls,
        context_window: int,
        *,
        share: float,
        memory_share: float,
        persona_share: float = 0.0,
        lore_share: float = 0.0,
        reply_tokens: int = 0,
    ) -> ContextBudget:
        """`share` of the window for the prompt, leaving room for the reply; memories, the persona and
        the lore get their parts of it."""
        total = int(context_window * share)
        if reply_tokens and context_window - reply_tokens > 0:
            total = min(total, context_window - reply_tokens)
        total = max(1, total)
        return cls(
            total=total,
            memories=int(total * memory_share),
            persona=int(total * persona_share),
            lore=int(total * lore_share),
        )


@dataclass(frozen=True, slots=True)
class CardParts:
    """What a character card adds to a prompt besides the system prompt, macros already filled."""

    lore: Sequence[ActiveLore] = ()  # active entries, most preferred first (memory.owners.lore)
    lore_token_budget: int | None = None  # the book's own cap, within the lore share
    depth_prompt: DepthPrompt | None = None
    post_history_instructions: str = ""

    @classmethod
    def of(
        cls,
        card: Mapping[str, Any] | None,
        *,
        display_name: str,
        recent: Sequence[str],
        user: str,
        default_scan_depth: int,
    ) -> CardParts:
        """The parts of a personality's stored card (`personalities.card`) for a reply to `recent`
        (the conversation's messages, newest last) to `user`: its active lore, depth prompt and
        post-history instructions, their macros filled."""
        chat = card_chat(card, display_name)
        book = read_lorebook(card)
        note = chat.depth_prompt
        return cls(
            lore=match_lore(book, recent, default_scan_depth=default_scan_depth, char=chat.char, user=user),
            lore_token_budget=book.token_budget,
            depth_prompt=(
                DepthPrompt(fill_chat_macros(note.text, char=chat.char, user=user), note.depth, note.role)
                if note is not None
                else None
            ),
            post_history_instructions=fill_chat_macros(
                chat.post_history_instructions, char=chat.char, user=user
            ),
        )


@dataclass(slots=True)
class BuiltContext:
    messages: list[dict[str, str]]
    tokens: int
    budget: int
    memories_used: int = 0
    history_used: int = 0
    history_dropped: int = 0
    sections: list[str] = field(default_factory=list)  # the parts the prompt holds, in their order
    lore_used: list[ActiveLore] = field(default_factory=list)

    @property
    def persona_used(self) -> bool:
        return "persona" in self.sections

    @property
    def summary_used(self) -> bool:
        return "summary" in self.sections


def _fit_text(text: str, budget: int, model: str | None, *, keep_end: bool) -> str:
    """The longest start (or end) of text, cut at a word, that fits `budget` tokens as a message."""
    room = budget - count_message_tokens([{"role": "system", "content": ""}], model)
    while room > 0:
        piece = truncate_to_tokens(text, room, keep_end=keep_end)
        # The cut counts with one tokenizer; the model's own may count the piece higher: cut again.
        over = count_message_tokens([{"role": "system", "content": piece}], model) - budget
        if over <= 0:
            return piece
        room -= over
    return ""


def _clean(text: str | None) -> str:
    return " ".join(strip_chat_template_tokens(text or "").split())


def _persona_block(persona: PromptPersona, others: Sequence[PromptPersona], about: str | None) -> str:
    block = f"\n\n{PERSONA_HEADER}\n{persona.introduction()}."
    if about:
        block += f"\nAbout them: {about}"
    if others:
        block += f"\n{OTHERS_HEADER} " + "; ".join(o.introduction() for o in others) + "."
    return block


def _fit_persona(
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


def _history_message(message: HistoryMessage, *, name_speakers: bool) -> dict[str, str]:
    content = strip_chat_template_tokens(message.content)
    if message.role == "user" and name_speakers and message.author_name:
        content = f"{message.author_name}: {content}"
    return {"role": "assistant" if message.role == "assistant" else "user", "content": content}


def _card_message(role: str, text: str, room: int, model: str | None) -> dict[str, str] | None:
    """A message of the card's (depth prompt, post-history instructions) within `room` tokens, cut at
    its end when it is longer; None when it is empty or nothing of it fits."""
    text = strip_chat_template_tokens(text).strip()
    if not text or room <= 0:
        return None
    message = {"role": role, "content": text}
    if count_message_tokens([message], model) > room:
        message["content"] = _fit_text(text, room, model, keep_end=False)
    return message if message["content"] else None


def _with_lore(base: str, entries: Sequence[ActiveLore]) -> str:
    """The system prompt with the lore placed before and after it, each side by insertion order."""

    def block(position: Position) -> str:
        placed = sorted(
            (lore for lore in entries if lore.entry.position is position),
            key=lambda lore: (lore.entry.insertion_order, lore.entry.number),
        )
        return "\n".join(strip_chat_template_tokens(lore.text).strip() for lore in placed)

    return "\n\n".join(part for part in (block(Position.BEFORE), base, block(Position.AFTER)) if part)


def _fit_lore(
    base: str, lore: Sequence[ActiveLore], room: int, count: Callable[[list[dict[str, str]]], int]
) -> tuple[list[ActiveLore], int]:
    """The active entries that fit in `room` tokens, in their order of preference until one does not
    (SillyTavern's budget), and their tokens: each counted alone, then the prompt once (issue 33)."""
    empty, system = count([{"role": "system", "content": ""}]), count([{"role": "system", "content": base}])
    costs: list[int] = []
    for entry in lore:
        at_depth = entry.entry.position is Position.DEPTH
        text = entry.text if at_depth else strip_chat_template_tokens(entry.text).strip()
        costs.append(count([{"role": entry.entry.role if at_depth else "system", "content": text}]))
        costs[-1] += 0 if at_depth else 1 - empty  # its newline, without a message's own tokens
        if sum(costs) > room:
            costs.pop()
            log.debug("Lore budget (%d tokens) full: %d entries left out", room, len(lore) - len(costs))
            break
    while True:  # tokens can merge across the lines joined: what they take together, exactly
        chosen = list(lore[: len(costs)])
        placed = [e for e in chosen if e.entry.position is not Position.DEPTH]
        used = sum(c for e, c in zip(chosen, costs, strict=True) if e.entry.position is Position.DEPTH)
        used += count([{"role": "system", "content": _with_lore(base, placed)}]) - system if placed else 0
        if used <= room or not costs:
            return chosen, used
        costs.pop()


def _at_depth(
    history: list[dict[str, str]], inserts: Sequence[tuple[int, dict[str, str]]]
) -> list[dict[str, str]]:
    """The history with each (depth, message) put `depth` messages before its end (0: after the
    newest; deeper than the history: before the oldest kept). Messages of one depth and role are one."""
    merged: dict[tuple[int, str], dict[str, str]] = {}
    for depth, message in inserts:
        key = (min(depth, len(history)), message["role"])
        if key in merged:
            merged[key] = {**merged[key], "content": merged[key]["content"] + "\n" + message["content"]}
        else:
            merged[key] = message
    placed = list(history)
    for (depth, _), message in sorted(merged.items(), key=lambda item: item[0][0]):
        placed.insert(len(placed) - depth - sum(1 for d, _ in merged if d < depth), message)
    return placed


def build_context(
    *,
    system_prompt: str,
    user_name: str,
    memories: Sequence[str],
    summary: str | None,
    history: Sequence[HistoryMessage],
    budget: ContextBudget,
    model: str | None,
    name_speakers: bool = False,
    persona: PromptPersona | None = None,
    others: Sequence[PromptPersona] = (),
    card: CardParts | None = None,
) -> BuiltContext:
    """The prompt for the newest message of `history` (oldest first), never over `budget.total`.

    The system message, in order: the lore placed before the character, the system prompt (the
    character's definition), the lore placed after it (the active entries that fit `budget.lore` and
    the book's own budget, most preferred first); the persona of the user answered (and the names of
    `others` speaking here) within `budget.persona`; recalled memories within `budget.memories`; the
    rolling summary. Then as many recent messages as fit, newest kept, with the card's depth prompt
    and its lore at a depth put among them, and its post-history instructions last. The system prompt,
    the newest message (cut from its start if it alone is too long) and the card's depth prompt and
    post-history instructions are always included, the last two cut to what room is left.
    """
    if not history:
        raise ValueError("history must end with the message to answer")
    card = card or CardParts()

    def count(messages: list[dict[str, str]]) -> int:
        return count_message_tokens(messages, model)

    base = strip_chat_template_tokens(system_prompt).strip() or "You are a helpful character."
    sections = ["system"]
    newest = _history_message(history[-1], name_speakers=name_speakers)
    base_tokens = count([{"role": "system", "content": base}])
    # What must fit whatever happens: the system prompt and the newest message.
    newest_room = max(1, budget.total - base_tokens)
    if count([newest]) > newest_room:
        newest = {**newest, "content": _fit_text(newest["content"], newest_room, model, keep_end=True)}
    # The tokens of the messages outside the system message that the prompt keeps in any case.
    outside = count([newest])

    # The card's own instructions are part of the character: before anything optional.
    post_history = _card_message(
        "system", card.post_history_instructions, budget.total - base_tokens - outside, model
    )
    outside += count([post_history]) if post_history else 0
    depth_prompt = card.depth_prompt
    depth_note = (
        _card_message(depth_prompt.role, depth_prompt.text, budget.total - base_tokens - outside, model)
        if depth_prompt is not None
        else None
    )
    outside += count([depth_note]) if depth_note else 0

    lore_room = min(budget.lore, card.lore_token_budget or budget.lore, budget.total - base_tokens - outside)
    lore_used, lore_tokens = _fit_lore(base, card.lore, lore_room, count) if card.lore else ([], 0)
    system_text = _with_lore(base, [e for e in lore_used if e.entry.position is not Position.DEPTH])
    inserts = [
        (e.entry.depth, {"role": e.entry.role, "content": e.text})
        for e in lore_used
        if e.entry.position is Position.DEPTH
    ]
    outside += sum(count([message]) for _, message in inserts)
    if lore_used:
        sections.append("lore")
        log.debug(
            "Lore in the prompt (%d tokens): %s",
            lore_tokens,
            "; ".join(f"entry {e.entry.number} ({e.entry.label}): {e.reason}" for e in lore_used),
        )
    if depth_note is not None and depth_prompt is not None:
        inserts.append((depth_prompt.depth, depth_note))
    system_tokens = count([{"role": "system", "content": system_text}])
    reserved = system_tokens + outside

    if persona is not None and budget.persona > 0:
        defined = system_text
        block = _fit_persona(
            persona,
            others,
            min(budget.persona, budget.total - reserved),
            lambda block: count([{"role": "system", "content": defined + block}]) - system_tokens,
        )
        if block:
            system_text += block
            sections.append("persona")

    current = count([{"role": "system", "content": system_text}])
    memories_used = 0
    if memories:
        header = "\n\n" + MEMORY_HEADER.format(user=user_name)
        memory_budget = min(budget.memories, budget.total - reserved - (current - system_tokens))
        lines: list[str] = []
        for memory in memories:
            line = "\n- " + " ".join(strip_chat_template_tokens(memory).split())
            candidate = system_text + header + "".join([*lines, line])
            if count([{"role": "system", "content": candidate}]) - current > memory_budget:
                break
            lines.append(line)
        if lines:
            system_text += header + "".join(lines)
            memories_used = len(lines)
            sections.append("memories")

    current = count([{"role": "system", "content": system_text}])
    if summary and summary.strip():
        room = budget.total - current - outside
        block = "\n\n" + SUMMARY_HEADER + "\n"
        overhead = count([{"role": "system", "content": system_text + block}]) - current
        text = _fit_text(strip_chat_template_tokens(summary).strip(), room - overhead, model, keep_end=True)
        if text:
            system_text += block + text
            sections.append("summary")
            current = count([{"role": "system", "content": system_text}])

    used = current + outside
    kept: list[dict[str, str]] = [newest]
    older = history[:-1]
    dropped = 0
    for index in range(len(older) - 1, -1, -1):
        source = older[index]
        message = _history_message(source, name_speakers=name_speakers)
        if source.token_count > 0:
            # Counted when stored (with the per-call priming, so an upper bound); plus the speaker label.
            label = message["content"][: len(message["content"]) - len(source.content)]
            tokens = source.token_count + (count_tokens(label, model) + 1 if label else 0)
        else:
            tokens = count([message])
        if used + tokens > budget.total:
            dropped = index + 1
            break
        kept.append(message)
        used += tokens
    kept.reverse()
    sections.append("history")
    history_used = len(kept)
    kept = _at_depth(kept, inserts)
    if depth_note is not None:
        sections.append("depth prompt")
    if post_history is not None:
        kept.append(post_history)
        sections.append("post-history instructions")
    messages = [{"role": "system", "content": system_text}, *kept]
    total = count(messages)
    while total > budget.total and len(messages) > 2:  # defensive: never ship an over-budget prompt
        messages.pop(1)
        dropped += 1
        history_used -= 1
        total = count(messages)
    return BuiltContext(
        messages=messages,
        tokens=total,
        budget=budget.total,
        memories_used=memories_used,
        history_used=history_used,
        history_dropped=dropped,
        sections=sections,
        lore_used=lore_used,
    )
