"""The text of /personality's replies, built from what the services returned (Discord markdown)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.messages import DISCORD_LIMIT
from bot.texts import storage_lines
from memory.service import MemoryMode

if TYPE_CHECKING:
    from memory.service import FormationReport, MemoryStats
    from models import LLMConfig, Personality

PROMPT_PREVIEW_CHARS = 300
LIST_LIMIT = 50


def describe_model(config: LLMConfig | None, model: str | None, fallback: str) -> str:
    """A personality's model choice: an admin-made LLM config, a model string, or the fallback."""
    if config is not None:
        return f"config `{config.name}`"
    return f"`{model}`" if model else fallback


def personality_card(p: Personality, *, show_prompt: bool, stats: MemoryStats | None = None) -> str:
    """A personality's settings; its prompt and memory storage only for those who manage it."""
    summarizer_prompt = "custom" if p.summarizer_prompt_id else "default"
    lines = [
        f"**{p.display_name}** (`{p.name}`)",
        f"Owner: {f'<@{p.owner_id}>' if p.owner_id else 'the operator'}",
        "Chat model: " + describe_model(p.chat_llm_config, p.chat_model, "deployment default"),
        f"Memory: {'on' if p.memory_enabled else 'off'}, stored {p.memory_mode}",
        "Summarizer: "
        + describe_model(p.summarizer_llm_config, p.summarizer_model, "deployment default")
        + f", {summarizer_prompt} prompt",
    ]
    if p.avatar_url:
        lines.append(f"Avatar: <{p.avatar_url}>")
    if show_prompt:
        preview = p.system_prompt[:PROMPT_PREVIEW_CHARS]
        ellipsis = "…" if len(p.system_prompt) > PROMPT_PREVIEW_CHARS else ""
        lines.append(f"Prompt: {preview}{ellipsis}")
    if stats is not None:
        lines.extend(storage_lines(stats))
    return "\n".join(lines)


def personality_list(rows: Sequence[Personality], user_id: str) -> str:
    if not rows:
        return "No personalities yet. Create one with `/personality create`."
    lines = [
        f"• **{p.display_name}** (`{p.name}`), memory {p.memory_mode}"
        + (" (yours)" if p.owner_id == user_id else "")
        for p in rows[:LIST_LIMIT]
    ]
    if len(rows) > LIST_LIMIT:
        lines.append(f"…and {len(rows) - LIST_LIMIT} more.")
    return "\n".join(lines)[:DISCORD_LIMIT]


def summarization_changed(p: Personality, previous: MemoryMode) -> str:
    new = MemoryMode(p.memory_mode)
    if new is previous:
        return f"**{p.display_name}** already stores memories {new}; nothing changed."
    if new is MemoryMode.VERBATIM:
        return (
            f"**{p.display_name}** now stores new memories verbatim. "
            "Existing summaries stay as they are. "
            "Users who chose their own summarization setting keep it."
        )
    kept = " alongside the original wording" if new is MemoryMode.HYBRID else ""
    return (
        f"**{p.display_name}** now stores new memories {new}: condensed by its summarizer{kept}, "
        "with roleplay formatting removed and names, dates and facts kept.\n"
        "Existing memories stay as they are until you run `/personality resummarize`. "
        "Users who chose their own summarization setting keep it."
    )


def resummarize_progress(p: Personality, done: int, total: int) -> str:
    return f"Re-summarizing {p.display_name}'s memories: {done} of {total}…"


# Why a summary was not used although the summarizer answered (memory.formation.summarizer.FallbackReason).
REJECTED = {
    "refused": "the model refused",
    "invented": "a fact nobody said",
    "other_user": "another user's facts",
    "unparseable": "no summary in the answer",
}


def resummarize_report(p: Personality, report: FormationReport) -> str:
    """What /personality resummarize did, and why memories were left as they were: the summarizer
    unavailable, or its summaries rejected (and for what)."""
    text = f"Re-summarized {report.memories} of {report.exchanges} memories of {p.display_name}; "
    rejected = {reason: n for reason, n in report.fallbacks.items() if n and reason in REJECTED}
    unavailable = sum(report.fallbacks.values()) - sum(rejected.values())
    why = []
    if unavailable:
        why.append(f"{unavailable} with the summarizer unavailable")
    if rejected:
        reasons = ", ".join(f"{n} {REJECTED[reason]}" for reason, n in sorted(rejected.items()))
        why.append(f"{sum(rejected.values())} whose summaries were rejected ({reasons})")
    left = f" ({'; '.join(why)})" if why else ""
    return text + (
        f"{report.extractive} left as they were{left}, "
        f"{report.fidelity_misses} carry the facts their summary dropped."
    )
