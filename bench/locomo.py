"""LoCoMo conversations as `personae import` transcripts and recall questions (for bench.recall_quality).

LoCoMo (Maharana et al., ACL 2024) is a public benchmark of very long conversations between two
speakers, with questions whose answers sit in known turns. The product knows nothing of its format:
this converter writes each conversation as the JSONL transcript `personae import` reads, as the
scoring in ../shared/eval/README.md prescribes: speaker_a is the user, speaker_b the personality,
each turn one line with `id` = its dia_id, the session's date as the timestamp, and an image's
caption appended as ` [shares: CAPTION]`. Questions of categories 1 to 4 with evidence are kept.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.recall_sets import Dialogue, Question

# ../shared/eval/locomo-dev beside the checkout, or beside the folder of worktrees holding it.
DEV_DIR = next(
    (
        found
        for parent in Path(__file__).resolve().parents[1:]
        if (found := parent / "shared" / "eval" / "locomo-dev").is_dir()
    ),
    Path(__file__).resolve().parents[2] / "shared" / "eval" / "locomo-dev",
)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_SESSION = re.compile(r"session_(\d+)")


def session_time(text: str) -> datetime:
    """`1:56 pm on 8 May, 2023` -> 2023-05-08 13:56 UTC (the data gives no zone)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def transcript_lines(data: dict[str, Any], user_id: str) -> list[dict[str, Any]]:
    """Every turn of every session, in order, as transcript records."""
    user = data["speaker_a"]
    sessions = sorted(int(m.group(1)) for key in data if (m := _SESSION.fullmatch(key)))
    lines: list[dict[str, Any]] = []
    for number in sessions:
        timestamp = session_time(data[f"session_{number}_date_time"]).isoformat()
        for turn in data[f"session_{number}"]:
            text = turn["text"]
            if turn.get("blip_caption"):
                text = f"{text} [shares: {turn['blip_caption']}]"
            lines.append(
                {
                    "id": turn["dia_id"],
                    "role": "user" if turn["speaker"] == user else "assistant",
                    "author": turn["speaker"],
                    "user_id": user_id,
                    "content": text,
                    "timestamp": timestamp,
                }
            )
    return lines


def load_dialogue(path: Path) -> Dialogue:
    """One LoCoMo conversation file as a dialogue: one user, one personality, its questions."""
    data = json.loads(path.read_text(encoding="utf-8"))
    user_id = f"locomo-{path.stem}"
    questions = [
        Question(text=q["question"], evidence=tuple(q["evidence"]), category=CATEGORIES[int(q["category"])])
        for q in data["qa"]
        # Category 5 (adversarial) asks about what was never said; a few questions have no evidence.
        if int(q["category"]) in CATEGORIES and q["evidence"]
    ]
    return Dialogue(
        name=f"locomo-{path.stem}",
        user_id=user_id,
        personality_name=data["speaker_b"],
        lines=transcript_lines(data, user_id),
        questions=questions,
    )


def dev_dialogues(directory: Path = DEV_DIR) -> list[Dialogue]:
    """The development conversations (../shared/eval/locomo-dev), read in place, never copied."""
    return [load_dialogue(path) for path in sorted(directory.glob("*.json"))]
