"""One memory, whole, as `personae memory show` prints it and /memory show says it: the same facts,
each a (label, value) line, then its text and the original it keeps (memory.service.WholeMemory)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from bot.messages import DISCORD_LIMIT
from bot.texts import excerpt

if TYPE_CHECKING:
    from memory.service import WholeMemory

MODES = {
    "verbatim": "verbatim (stored word for word)",
    "summarized": "summarized (stored as a summary)",
    "hybrid": "hybrid (the summary is searched; the original is kept beside it)",
}
SOURCES_SHOWN = 8
LABEL_WIDTH = 13  # "personality: ", the longest label
FACT_CHARS = 300  # of a fact on Discord (a correction's words can be long)


@dataclass(frozen=True, slots=True)
class ShownMemory:
    """A memory as both front doors show it: its facts, its text, and the original it keeps."""

    facts: list[tuple[str, str]]
    text: str
    original_label: str | None
    original: str | None


def _at(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def _where(w: WholeMemory) -> str:
    """The venue: a guild's channel, a DM, or a channel of no guild that is not Discord's (the terminal)."""
    if w.guild_id is not None:
        return f"channel {w.channel_id} of guild {w.guild_id}" if w.channel_id else f"guild {w.guild_id}"
    if w.channel_id and not w.channel_id.isdigit():
        return f"the {w.channel_id} chat"
    return "a direct message"


def _sources(w: WholeMemory) -> str:
    if not w.sources:
        return "messages no longer in the log"
    shown = [f"{m.external_id} ({m.author}, {m.said_at:%Y-%m-%d %H:%M})" for m in w.sources[:SOURCES_SHOWN]]
    more = len(w.sources) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _carried(w: WholeMemory) -> str:
    if w.carried_facts:
        return f"{', '.join(w.carried_facts)} (facts its summary dropped, in its text's last lines)"
    if w.summarizer in ("verbatim", "cleaned"):
        return "nothing: no summary dropped anything"
    return "nothing: the summary kept every key fact"


def _edited(w: WholeMemory) -> str:
    if w.edited_at is None:
        return "no"
    out = f"; took out {', '.join(w.corrected_out)} (never recalled again)" if w.corrected_out else ""
    return f"yes, corrected by the user {_at(w.edited_at)}{out}"


def _carries(w: WholeMemory) -> str:
    if w.edited_at is not None:
        return "nothing: its text is the user's correction"
    return _carried(w)


def shown_memory(w: WholeMemory) -> ShownMemory:
    """The facts of a memory (see the module docstring)."""
    m = w.memory
    title = f", “{w.conversation_title}”" if w.conversation_title else ""
    conversation = (
        f"conversation {w.conversation_id}{title}, in {_where(w)}"
        if w.conversation_id
        else f"{_where(w)} (its conversation deleted)"
    )
    facts = [
        ("id", str(m.id)),
        ("personality", m.personality_name),
        ("said", _at(m.occurred_at)),
        ("stored as", MODES.get(w.mode, w.mode)),
        ("made", w.how_made),
        ("key facts", ", ".join(w.kept_facts) or "none (no names, numbers, dates or places)"),
        ("carries", _carries(w)),
        ("from", _sources(w)),
        ("where", conversation),
        ("formed", _at(w.formed_at)),
        ("pinned", "yes: recalled first when relevant" if m.pinned else "no"),
        ("edited", _edited(w)),
    ]
    if w.times_said > 1:
        last = f", last {_at(w.last_said_at)}" if w.last_said_at else ""
        facts.append(("said again", f"{w.times_said} times in all{last}"))
    if w.repeat_of is not None:
        facts.append(("repeats", f"memory {w.repeat_of} of another conversation"))
    if m.superseded:
        facts.append(("superseded", m.superseded.describe().removeprefix("superseded ")))
    facts.append(("searchable", "yes" if w.indexed else "not yet (waiting to be indexed, or set aside)"))
    label = None
    if w.original is not None:
        label = "original (hybrid)" if w.mode == "hybrid" and not m.edited else "as it was said"
    return ShownMemory(facts, m.content, label, w.original)


def memory_lines(w: WholeMemory) -> list[str]:
    """The memory for a terminal: a line per fact, then the original it keeps and its text, in full."""
    shown = shown_memory(w)
    lines = [f"{label + ':':<{LABEL_WIDTH}}{value}" for label, value in shown.facts]
    if shown.original is not None:
        lines += ["", f"{shown.original_label}:", *_indented(shown.original)]
    return [*lines, "", "text:", *_indented(shown.text)]


def _indented(text: str) -> list[str]:
    return [f"  {line}" for line in text.splitlines() or [""]]


def memory_message(w: WholeMemory) -> str:
    """The memory for Discord, within its limit: the facts whole, the texts cut to fit."""
    shown = shown_memory(w)
    head = "\n".join(f"**{label}:** {excerpt(value, FACT_CHARS)}" for label, value in shown.facts)
    blocks = [("text", shown.text)]
    if shown.original is not None and shown.original_label is not None:
        blocks.insert(0, (shown.original_label, shown.original))
    room = (DISCORD_LIMIT - len(head)) // len(blocks) - 20
    quoted = [f"**{label}:**\n> {excerpt(text, max(40, room))}" for label, text in blocks]
    return "\n".join([head, *quoted])[:DISCORD_LIMIT]
