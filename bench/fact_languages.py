"""The fact check in every language: precision and recall of `foreign_facts` on labelled summaries.

bench/data/fact_languages.jsonl holds exchanges written for this bench in German, Spanish, French,
Japanese, Arabic, emoji-only lines and English with its everyday spellings ("a dozen", "half past
two", "2:30pm", "1.5k", "3/3"), each with correct summaries (the check must keep them) and wrong ones
(a number, a date, a time or a name changed or invented: the check must reject them). A summary is
rejected when `memory.formation.fidelity.foreign_facts` finds a fact in it that the exchange does not
hold, as the summarizer checks every answer. Printed per language: correct summaries rejected (false
rejections, the target is at most 2 %), wrong ones caught (recall) and the check's precision. The
check was tuned on that set, and on the second to fifth rounds after their first runs;
fact_languages_heldout.jsonl (written the same way, after the tuning, and never tuned on) is the
honest figure.

    .venv/bin/python -m bench.fact_languages [--show]
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench._common import bench_parser
from memory.formation.cleaning import speaker_label
from memory.formation.fidelity import foreign_facts, vocabulary

DATA = Path(__file__).resolve().parent / "data"
SETS = {
    "tuned on": DATA / "fact_languages.jsonl",
    "second round, tuned on after its first run": DATA / "fact_languages_second.jsonl",
    "third round, tuned on after its first run": DATA / "fact_languages_third.jsonl",
    "fourth round, tuned on after its first run": DATA / "fact_languages_fourth.jsonl",
    "fifth round, tuned on after its first run": DATA / "fact_languages_fifth.jsonl",
    "held out": DATA / "fact_languages_heldout.jsonl",
}
LANGUAGES = ("en", "de", "es", "fr", "ja", "ar", "emoji")


def rejected(exchange: str, summary: str) -> list[str]:
    """The facts of `summary` that `exchange` does not hold, as the summarizer's check finds them."""
    names = [label.group(1) for line in exchange.splitlines() if (label := speaker_label(line))]
    return foreign_facts(summary, vocabulary(exchange), names=names)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--show", action="store_true", help="print each wrongly judged summary")
    args = parser.parse_args()
    for name, path in SETS.items():
        print(f"{path.name} ({name}):")
        report(path, show=args.show)


def report(path: Path, *, show: bool) -> None:
    counts: Counter[tuple[str, str]] = Counter()
    for raw in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(raw)
        foreign = rejected(row["exchange"], row["summary"])
        counts[row["lang"], row["label"]] += 1
        counts[row["lang"], f"{row['label']} rejected"] += bool(foreign)
        if show and bool(foreign) != (row["label"] == "wrong"):
            print(f"  [{row['lang']} {row['label']}] {row['summary']!r} -> {foreign}")
    print(f"  {'language':8s} {'correct':>7s} {'refused':>8s} {'wrong':>6s} {'caught':>7s} {'precision':>9s}")
    for lang in LANGUAGES:
        correct, wrong = counts[lang, "correct"], counts[lang, "wrong"]
        refused, caught = counts[lang, "correct rejected"], counts[lang, "wrong rejected"]
        precision = caught / (caught + refused) if caught + refused else 1.0
        print(
            f"  {lang:8s} {correct:7d} {refused / max(1, correct):8.1%} {wrong:6d} "
            f"{caught / max(1, wrong):7.1%} {precision:9.1%}"
        )


if __name__ == "__main__":
    main()
