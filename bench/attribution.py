"""Who said what: the attribution check (memory/formation/attribution.py) on labelled summaries.

LoCoMo's annotators wrote, for each session, observations that name who did what, each with the
turn that says it ("Melanie ran a charity race for mental health last Saturday.", D2:1). Each one
is checked against its exchange (that turn and the turn answering it, or the one it answers, as
formation groups them): a correct summary. The same observation with the two speakers' names
swapped is a wrong one (only those the swap changes). Printed: correct summaries rejected (false
rejections), wrong ones caught (recall), and the sentences whose subject or owners the check could
not tell (unchecked, never passed as checked). Then the hand-written cases of
bench/data/attribution_cases.jsonl (questions stated as facts, another user's claim) and the held-out
ones of bench/data/attribution_heldout.jsonl (two speakers of my own, each fact correct and swapped).

    .venv/bin/python -m bench.attribution [--locomo-dir ../shared/eval/locomo-dev]
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from bench._common import bench_parser
from bench.locomo import DEV_DIR
from memory.formation.attribution import Line, check_attribution

CASES = Path(__file__).resolve().parent / "data" / "attribution_cases.jsonl"
# Written before the rules they measure (inflected verbs, thanks, acknowledging) and never tuned on.
HELD_OUT = CASES.with_name("attribution_heldout.jsonl")


def _swapped(text: str, a: str, b: str) -> str:
    marker = "\ue003"
    text = re.sub(rf"\b{re.escape(a)}\b", marker, text)
    text = re.sub(rf"\b{re.escape(b)}\b", a, text)
    return text.replace(marker, b)


def locomo_cases(data: dict[str, Any]) -> list[tuple[list[Line], str, str]]:
    """(exchange, observation, observation with the speakers swapped) for every observation."""
    a, b = data["speaker_a"], data["speaker_b"]
    turns: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    for key, value in data.items():
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list):
            for index, turn in enumerate(value):
                turns[turn["dia_id"]] = (index, value)
    cases = []
    for key, value in data.items():
        if not key.endswith("_observation"):
            continue
        for observations in value.values():
            for text, evidence in observations:
                first = evidence[0] if isinstance(evidence, list) else evidence
                if first not in turns:
                    continue
                index, session = turns[first]
                # The exchange holding the turn: it and its answer, or the line it answers.
                pair = session[index : index + 2] if index + 1 < len(session) else session[index - 1 :]
                lines = [Line(t["speaker"], t["text"]) for t in pair]
                cases.append((lines, text, _swapped(text, a, b)))
    return cases


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--locomo-dir", type=Path, default=DEV_DIR)
    args = parser.parse_args()
    counts: Counter[str] = Counter()
    for path in sorted(args.locomo_dir.glob("*.json")):
        for lines, right, wrong in locomo_cases(json.loads(path.read_text())):
            verdict = check_attribution(right, lines)
            counts["correct"] += 1
            counts["correct rejected"] += verdict.wrong
            counts["correct unchecked"] += verdict.unchecked > 0 and not verdict.checked
            if wrong != right:
                caught = check_attribution(wrong, lines)
                counts["wrong"] += 1
                counts["wrong caught"] += caught.wrong
                counts["wrong unchecked"] += caught.unchecked > 0 and not caught.checked
    print(f"LoCoMo dev observations ({args.locomo_dir.name}):")
    print(
        f"  correct {counts['correct']:4d}  rejected {counts['correct rejected']:3d} "
        f"({counts['correct rejected'] / max(1, counts['correct']):.1%})  "
        f"unchecked {counts['correct unchecked'] / max(1, counts['correct']):.1%}"
    )
    print(
        f"  swapped {counts['wrong']:4d}  caught   {counts['wrong caught']:3d} "
        f"({counts['wrong caught'] / max(1, counts['wrong']):.1%})  "
        f"unchecked {counts['wrong unchecked'] / max(1, counts['wrong']):.1%}"
    )
    for path in (CASES, HELD_OUT):
        print_cases(path)


def print_cases(path: Path) -> None:
    """Correct and wrong hand-written summaries of a labelled file, and how many were rejected."""
    kinds: Counter[str] = Counter()
    for raw in path.read_text().splitlines():
        case = json.loads(raw)
        lines = [Line(speaker, text, bool(other)) for speaker, text, other in case["lines"]]
        verdict = check_attribution(case["summary"], lines)
        kinds[f"{case['label']} {'rejected' if verdict.wrong else 'kept'}"] += 1
    print(f"Hand-written cases (bench/data/{path.name}):")
    for label in ("correct", "wrong"):
        kept, rejected = kinds[f"{label} kept"], kinds[f"{label} rejected"]
        print(f"  {label:8s} {kept + rejected:3d}  rejected {rejected:3d}")


if __name__ == "__main__":
    main()
