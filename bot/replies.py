"""The text of slash-command replies, built from what the services returned (Discord markdown)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memory.types import MemoryMode

if TYPE_CHECKING:
    from memory.formation.forming import FormationReport
    from memory.formation.stats import MemoryStats
    from memory.owners.incognito import IncognitoSpan
    from memory.recall.search import RecalledMemory
    from memory.types import ModelConfig
    from models import LLMConfig, Personality, UserSettings

DISCORD_LIMIT = 2000
EXCERPT_CHARS = 160
PROMPT_PREVIEW_CHARS = 300
LIST_LIMIT = 50
# A user's memory setting: inherited from the wider scope (None), on or off.
MEMORY_STATE = {None: "inherited", True: "on", False: "off"}


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def characters(n: int) -> str:
    return f"{n:,} character{'' if n == 1 else 's'}"


def scope_of(p: Personality | None) -> str:
    return f"with **{p.display_name}**" if p else "with every personality"


def _storage_lines(stats: MemoryStats) -> list[str]:
    lines = [
        f"Memories: {stats.memories}",
        f"Storage: {characters(stats.stored_chars)} (verbatim would be {characters(stats.source_chars)}, "
        f"saving {stats.saving_percent:.0f}%)",
    ]
    if stats.verbatim_chars:
        lines.append(f"Verbatim kept (hybrid, pinned, corrected): {characters(stats.verbatim_chars)}")
    if failed := stats.fallback_line():
        lines.append(f"Summaries: {failed}")
    return lines


def personality_status(
    p: Personality,
    mode: MemoryMode | None,
    source: str,
    summarizer: ModelConfig | None,
    title: str | None,
    stats: MemoryStats,
) -> str:
    """/memory status for one personality: the effective mode and who set it, the model, storage."""
    lines = [f"**{p.display_name}** and you", f"Memory: {'on' if mode else 'off'} (set by {source})"]
    if mode is not None:
        lines.append(f"Stored as: {mode} (set by {source})")
    lines.append(f"Summarizer model: {summarizer.model if summarizer else 'none (extractive summaries)'}")
    if title:
        lines.append(f"Conversation here: {title}")
    lines.extend(_storage_lines(stats))
    lines.append(f"Pending: {stats.pending_messages} messages waiting to become memories")
    return "\n".join(lines)


def overall_status(general: UserSettings | None, stats: MemoryStats) -> str:
    """/memory status across personalities: the user's own general settings, storage."""
    enabled = general.memory_enabled if general else None
    memory = {None: "on unless a personality turns it off", True: "on", False: "off"}[enabled]
    lines = [
        "**All personalities**",
        f"Memory: {memory}",
        f"Summarization: {general.summarization if general else 'default'} "
        "(default = each personality's choice)",
        *_storage_lines(stats),
    ]
    return "\n".join(lines)


def _until(span: IncognitoSpan) -> str:
    if span.ends_at is None:
        return "until you turn it off"
    at = int(span.ends_at.timestamp())
    return f"until <t:{at}:f> (<t:{at}:R>)"  # Discord shows these in the reader's time zone


def _incognito_scope(span: IncognitoSpan) -> str:
    return f"with **{span.personality_name}**" if span.personality_name else "with every personality"


def incognito_status(spans: Sequence[IncognitoSpan]) -> str:
    """The /memory status line: which incognito spans are on, and until when."""
    if not spans:
        return "Incognito: off"
    return "Incognito: on " + "; on ".join(f"{_incognito_scope(s)}, {_until(s)}" for s in spans)


def incognito_started(span: IncognitoSpan, reaction: str) -> str:
    who = f"**{span.personality_name}**" if span.personality_name else "Every personality"
    return (
        f"Incognito is on {_incognito_scope(span)}, {_until(span)}. {who} still answers you and follows "
        "the conversation, but nothing you say from now on becomes a memory, and no "
        f"{reaction} appears on your messages. `/memory incognito state: off` ends it."
    )


def incognito_stopped(p: Personality | None, ended: int, still: IncognitoSpan | None) -> str:
    """After /memory incognito off; `still`: a span for every personality that naming `p` left on."""
    if ended:
        text = (
            f"Incognito is off {scope_of(p)}: what you say from now on can become memories again. "
            "What you said while incognito never will."
        )
    else:
        text = f"Incognito was not on {scope_of(p)}."
    if still is not None:
        text += (
            f" It is still on {_incognito_scope(still)}, {_until(still)}: "
            "`/memory incognito state: off` without a personality ends it."
        )
    return text


def settings_shown(p: Personality | None, row: UserSettings | None) -> str:
    state = MEMORY_STATE[row.memory_enabled if row else None]
    return (
        f"Your settings {scope_of(p)}: memory {state}, summarization "
        f"{row.summarization if row else 'default'}."
    )


def settings_saved(p: Personality | None, row: UserSettings) -> str:
    return (
        f"Saved: {scope_of(p)}, memory {MEMORY_STATE[row.memory_enabled]}, summarization {row.summarization}."
    )


def search_results(query: str, found: Sequence[tuple[RecalledMemory, Personality]]) -> str:
    if not found:
        return "No memories match that."
    lines = [f"Your memories matching “{excerpt(query, 60)}”:"]
    for m, p in found:
        lines.append(f"`{m.id}` {m.occurred_at:%Y-%m-%d}, {p.display_name}: {excerpt(m.content)}")
    lines.append("Forget one with `/memory forget memory:<id>`.")
    return "\n".join(lines)[:DISCORD_LIMIT]


def conversation_reset(p: Personality, removed: int) -> str:
    text = (
        f"Cleared the conversation summary of **{p.display_name}** here."
        if removed
        else f"**{p.display_name}** has no conversation summary here; nothing to clear."
    )
    return text + " Long-term memories are untouched."


EXPORT_NOTE = (
    "Your memories: one line per message, each exchange's memory on its last line. "
    "`personae import` reads this file."
)


def export_filename(p: Personality | None) -> str:
    return f"personae-memories-{p.name if p else 'all'}.jsonl"


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
        lines.extend(_storage_lines(stats))
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


def resummarize_report(p: Personality, report: FormationReport) -> str:
    return (
        f"Re-summarized {report.memories} of {report.exchanges} memories of {p.display_name}; "
        f"{report.extractive} left as they were (summarizer unavailable), "
        f"{report.fidelity_misses} carry the facts their summary dropped."
    )
