"""Build a chat prompt inside a token budget: system prompt, who the user is (their persona), memories,
rolling summary, recent messages.

Tokens are counted with the chat model's tokenizer (memory.tokens, the one counter), never estimated
from characters. Each message is counted once on its own; the sum
of per-message counts is an upper bound of the count of the whole list (the tokenizer's per-call
priming is paid once per call), so a prompt assembled from them never exceeds the budget. The final
prompt is counted once more as a whole and that figure is what the result reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memory.formation.cleaning import strip_chat_template_tokens
from memory.tokens import count_message_tokens, count_tokens, truncate_to_tokens

MEMORY_HEADER = "What you remember about {user} from earlier conversations:"
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

    @classmethod
    def for_window(
        cls,
        context_window: int,
        *,
        share: float,
        memory_share: float,
        persona_share: float = 0.0,
        reply_tokens: int = 0,
    ) -> ContextBudget:
        """`share` of the window for the prompt, leaving room for the reply; memories and the persona
        get their parts of it."""
        total = int(context_window * share)
        if reply_tokens and context_window - reply_tokens > 0:
            total = min(total, context_window - reply_tokens)
        total = max(1, total)
        return cls(total=total, memories=int(total * memory_share), persona=int(total * persona_share))


@dataclass(slots=True)
class BuiltContext:
    messages: list[dict[str, str]]
    tokens: int
    budget: int
    memories_used: int = 0
    history_used: int = 0
    history_dropped: int = 0
    sections: list[str] = field(default_factory=list)  # the parts the prompt holds, in their order

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
) -> BuiltContext:
    """The prompt for the newest message of `history` (oldest first), never over `budget.total`.

    In order: the system prompt; the persona of the user answered (and the names of `others`
    speaking here) within `budget.persona`; recalled memories within `budget.memories`; the rolling
    summary; then as many recent messages as fit, newest kept. The newest message is always included
    (cut from its start if it alone is too long).
    """
    if not history:
        raise ValueError("history must end with the message to answer")

    def count(messages: list[dict[str, str]]) -> int:
        return count_message_tokens(messages, model)

    base = strip_chat_template_tokens(system_prompt).strip() or "You are a helpful character."
    sections = ["system"]
    newest = _history_message(history[-1], name_speakers=name_speakers)
    system_tokens = count([{"role": "system", "content": base}])
    # What must fit whatever happens: the system prompt and the newest message.
    newest_room = max(1, budget.total - system_tokens)
    if count([newest]) > newest_room:
        newest = {**newest, "content": _fit_text(newest["content"], newest_room, model, keep_end=True)}
    reserved = system_tokens + count([newest])

    system_text = base
    if persona is not None and budget.persona > 0:
        block = _fit_persona(
            persona,
            others,
            min(budget.persona, budget.total - reserved),
            lambda block: count([{"role": "system", "content": base + block}]) - system_tokens,
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
        room = budget.total - current - count([newest])
        block = "\n\n" + SUMMARY_HEADER + "\n"
        overhead = count([{"role": "system", "content": system_text + block}]) - current
        text = _fit_text(strip_chat_template_tokens(summary).strip(), room - overhead, model, keep_end=True)
        if text:
            system_text += block + text
            sections.append("summary")
            current = count([{"role": "system", "content": system_text}])

    used = current + count([newest])
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
    messages = [{"role": "system", "content": system_text}, *kept]
    total = count(messages)
    while total > budget.total and len(messages) > 2:  # defensive: never ship an over-budget prompt
        messages.pop(1)
        dropped += 1
        total = count(messages)
    return BuiltContext(
        messages=messages,
        tokens=total,
        budget=budget.total,
        memories_used=memories_used,
        history_used=len(messages) - 1,
        history_dropped=dropped,
        sections=sections,
    )
