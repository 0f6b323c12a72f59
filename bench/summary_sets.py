"""The labelled sets of `bench.summaries`, and the key-fact check scored against their labels.

LoCoMo dev's exchanges with their facts labelled in bench/data/locomo_fact_labels.txt, and the
roleplay set (bench/data/roleplay_facts.jsonl) as one busy shared channel; each as `personae import`
lines with its labelled exchanges.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.locomo import dev_dialogues
from memory.formation.cleaning import strip_chat_template_tokens, strip_roleplay_formatting
from memory.formation.fidelity import Facts, key_facts, vocabulary, word_stem

DATA = Path(__file__).resolve().parent / "data"
LOCOMO_LABELS = DATA / "locomo_fact_labels.txt"
ROLEPLAY = DATA / "roleplay_facts.jsonl"
PERSONALITY = "Sage"  # the roleplay set's
# What the test server invents (testkit.llm_server.INVENTION) and the roleplay set's injections ask for.
PLANTED = ("Mallory", "450", "2023", "1111", "7731", "500", "crashed")
KINDS = ("name", "number", "date", "time")


@dataclass(frozen=True)
class Labelled:
    """One labelled exchange: its set, the id of the reply that ends it, its text as said, its facts,
    and the facts of another user's line before it."""

    set_name: str
    reply_id: str
    text: str
    speakers: tuple[str, ...]
    facts: tuple[str, ...]
    others: tuple[str, ...] = ()


@dataclass
class Transcript:
    """A set as `personae import` lines, one user (or several, shared channels) at a time."""

    name: str
    personality: str
    lines: list[dict[str, Any]]
    labelled: list[Labelled]


def locomo_transcripts(directory: Path) -> list[Transcript]:
    labels: dict[tuple[str, str], list[str]] = {}
    for row in LOCOMO_LABELS.read_text(encoding="utf-8").splitlines():
        if not row.strip() or row.startswith("#"):
            continue
        head, _, facts = row.partition("|")
        conversation, reply_id = head.split()
        labels[(conversation, reply_id)] = [f.strip() for f in facts.split(";") if f.strip() not in ("", "-")]
    transcripts = []
    for dialogue in dev_dialogues(directory):
        by_id = {line["id"]: line for line in dialogue.lines}
        labelled = []
        pending: list[dict[str, Any]] = []
        for line in dialogue.lines:
            if line["role"] == "user":
                pending.append(line)
                continue
            key = (dialogue.name, line["id"])
            if key in labels and pending:
                said = [*pending, by_id[line["id"]]]
                text = "\n".join(f"{m['author']}: {m['content']}" for m in said)
                speakers = tuple(sorted({m["author"] for m in said}))
                labelled.append(Labelled("LoCoMo dev", line["id"], text, speakers, tuple(labels[key])))
            pending = []
        transcripts.append(Transcript(dialogue.name, dialogue.personality_name, dialogue.lines, labelled))
    return transcripts


def roleplay_transcript() -> Transcript:
    """The roleplay set as one busy shared channel: its exchanges in order, each user's own, another
    user's line (and the reply to it) just before those that have one."""
    lines: list[dict[str, Any]] = []
    labelled = []
    venue = {"guild_id": "rp", "channel_id": "rp"}

    def said(line_id: str, author: str, text: str, reply_to: str | None = None) -> None:
        line = {"id": line_id, "author": author, "content": text, **venue}
        if reply_to is None:
            line.update(role="user", user_id=f"rp-{author.lower()}")
        else:
            line.update(role="assistant", reply_to=reply_to)
        lines.append(line)

    for raw in ROLEPLAY.read_text(encoding="utf-8").splitlines():
        record = json.loads(raw)
        others = record.get("others", [])
        for i, other in enumerate(others):
            said(f"{record['id']}-o{i}", other["author"], other["text"])
            said(f"{record['id']}-o{i}-r", PERSONALITY, "*nods*", reply_to=f"{record['id']}-o{i}")
        said(f"{record['id']}-u", record["user"], record["text"])
        said(f"{record['id']}-r", PERSONALITY, record["reply"], reply_to=f"{record['id']}-u")
        text = f"{record['user']}: {record['text']}\n{PERSONALITY}: {record['reply']}"
        other_facts = tuple(f for other in others for f in other["facts"])
        speakers = (record["user"], PERSONALITY)
        labelled.append(
            Labelled("roleplay", f"{record['id']}-r", text, speakers, tuple(record["facts"]), other_facts)
        )
    return Transcript("roleplay", PERSONALITY, lines, labelled)


def cleaned(text: str) -> str:
    return strip_roleplay_formatting(strip_chat_template_tokens(text))


def label_facts(labels: Iterable[str]) -> dict[str, set[str]]:
    """Labelled facts as the atoms the check compares, by kind (amounts count as numbers)."""
    atoms: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for label in labels:
        kind, _, text = label.partition(":")
        if kind == "name":
            atoms["name"].add(" ".join(word_stem(w) for w in _LETTERS_RE.findall(text)))
            continue
        held = vocabulary(text)
        atoms["time"].update(held.times)
        atoms["number"].update(held.numbers)
        atoms["date"].update(word for word in held.words if word in _DATE_WORDS)
    return atoms


_LETTERS_RE = re.compile(r"[^\W_][\w]*(?:['’][^\W\d_]+)?")
_DATE_WORDS = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
}  # fmt: skip


def predicted_facts(facts: Facts) -> dict[str, set[str]]:
    return {
        "name": set(facts.names),
        "number": set(facts.numbers),
        "date": set(facts.dates),
        "time": set(facts.times),
    }


def names_match(one: str, other: str) -> bool:
    a, b = {word_stem(w) for w in one.split()}, {word_stem(w) for w in other.split()}
    return a <= b or b <= a


@dataclass
class Tally:
    hits: Counter[str] = field(default_factory=Counter)
    predicted: Counter[str] = field(default_factory=Counter)
    labelled: Counter[str] = field(default_factory=Counter)

    def line(self, kind: str | None = None) -> str:
        kinds = [kind] if kind else list(KINDS)
        hits = sum(self.hits[k] for k in kinds)
        predicted = sum(self.predicted[k] for k in kinds)
        labelled = sum(self.labelled[k] for k in kinds)
        precision = 100 * hits / predicted if predicted else 100.0
        recall = 100 * self.hits[f"r:{kind}" if kind else "r"] / labelled if labelled else 100.0
        return f"precision {precision:5.1f}% ({predicted:4}), recall {recall:5.1f}% ({labelled:4})"


def check_the_check(labelled: list[Labelled]) -> Tally:
    tally = Tally()
    for exchange in labelled:
        gold = label_facts(exchange.facts)
        found = predicted_facts(key_facts(cleaned(exchange.text), names=exchange.speakers))
        for kind in KINDS:
            tally.predicted[kind] += len(found[kind])
            tally.labelled[kind] += len(gold[kind])
            same: Callable[[str, str], bool] = names_match if kind == "name" else str.__eq__
            tally.hits[kind] += sum(1 for f in found[kind] if any(same(f, g) for g in gold[kind]))
            recalled = sum(1 for g in gold[kind] if any(same(f, g) for f in found[kind]))
            tally.hits[f"r:{kind}"] += recalled
            tally.hits["r"] += recalled
    return tally
