"""Poison (issue 33): one bad row, one interrupted rebuild, one huge card must not stop everyone.

A transcript dated on the edge of the documented range used to end every later import, the worker and
`reindex` of every personality in `year 0 is out of range`; `reindex` emptied the index before it
crashed, so recall found nothing; a card's 20,000-entry lorebook held every reply for ~23 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import figures
from bench.reliability_cases.lab import CliResult, Lab, prepare_database

USER = "3001"


def _transcript(path: Path, name: str, exchanges: int, when: str | None = None) -> Path:
    stamp = {"timestamp": when} if when else {}
    with path.open("w", encoding="utf-8") as out:
        for i in range(exchanges):
            secret = f"{name}{i}code{i * 37 % 1000}"
            lines = [
                {
                    "id": f"{name}q{i}",
                    "role": "user",
                    "content": f"Remember {secret}.",
                    "user_id": USER,
                    **stamp,
                },
                {
                    "id": f"{name}r{i}",
                    "role": "assistant",
                    "content": f"{secret} kept.",
                    "reply_to": f"{name}q{i}",
                }
                | stamp,
            ]
            out.writelines(json.dumps(line) + "\n" for line in lines)
    return path


async def _env(lab: Lab, name: str, *personalities: str) -> dict[str, Any]:
    env: dict[str, Any] = {
        "database_url": await lab.cluster.create_database(f"{lab.name}_{name}"),
        "personae_data_dir": lab.workdir / f"poison-{name}",
    }
    await prepare_database(env["database_url"], *personalities)
    return env


async def _recalled(lab: Lab, scale: Scale, env: dict[str, Any], personality: str, words: str) -> bool:
    argv = ("recall", words, "--personality", personality, "--user", USER, "--json")
    result = await lab.command(scale, *argv, **env)
    return result.code == 0 and any(words in m["content"] for m in json.loads(result.out)["memories"])


def _said(result: CliResult) -> str:
    return f"exit {result.code}{' with a traceback' if result.traceback else ''}"


@case(
    "poison",
    "year-one-transcript",
    did="`personae import` of a transcript dated 0001-01-01T00:00:00Z into one personality, then an import "
    "into another, a recall there, `personae reindex` and `reindex --check`",
    expected="every command exits 0 with no traceback; the other personality recalls its memory; 0 drift",
)
async def year_one(lab: Lab, scale: Scale) -> Outcome:
    exchanges = scale.pick(3, 30)
    env = await _env(lab, "year1", "early", "later")
    early = await lab.cli(
        "import", str(_transcript(lab.workdir / "early.jsonl", "early", exchanges, "0001-01-01T00:00:00Z")),
        "--personality", "early", **env,
    )  # fmt: skip
    later = await lab.cli(
        "import",
        str(_transcript(lab.workdir / "later.jsonl", "later", exchanges)),
        "--personality",
        "later",
        **env,
    )
    found = await _recalled(lab, scale, env, "later", "later0code0")
    rebuilt = await lab.cli("reindex", **env)
    checked = await lab.cli("reindex", "--check", **env)
    runs = (early, later, rebuilt, checked)
    ok = all(r.code == 0 and not r.traceback for r in runs) and found and "no drift" in checked.out
    return check(
        ok,
        f"import dated year 1: {_said(early)}; import beside it: {_said(later)}; recalled there: {found}; "
        f"reindex: {_said(rebuilt)}; check: {(checked.out.strip().splitlines() or [checked.one_line()])[-1]}",
        figures(exchanges=exchanges),
    )


@case(
    "poison",
    "reindex-killed",
    did="memories imported; `personae reindex` started, and killed with SIGKILL while its first embedding "
    "request is under way (the model stalls it); then a recall and `reindex --check`",
    expected="the old index keeps serving: the memory is recalled, 0 drift",
)
async def reindex_killed(lab: Lab, scale: Scale) -> Outcome:
    # Quick: only the killed `reindex` is a process; the import before it and the recall and check
    # after it (what the old index serves) run in this process (Lab.command).
    exchanges = scale.pick(10, 200)
    env = await _env(lab, "killed", "keeper")
    imported = await lab.command(
        scale,
        "import",
        str(_transcript(lab.workdir / "keep.jsonl", "keep", exchanges)),
        "--personality",
        "keeper",
        **env,
    )
    lab.llm.script(_stall())
    process = await lab.spawn("reindex", **env)
    try:
        async with asyncio.timeout(120):
            while lab.llm.in_flight == 0 and process.returncode is None:  # noqa: ASYNC110 (a counter)
                await asyncio.sleep(0.05)
    finally:
        with contextlib.suppress(ProcessLookupError):  # it ended by itself (a failure, then seen below)
            os.killpg(process.pid, signal.SIGKILL)
        await process.communicate()
        lab.llm.reset()
    found = await _recalled(lab, scale, env, "keeper", "keep0code0")
    checked = await lab.command(scale, "reindex", "--check", **env)
    ok = imported.code == 0 and found and "no drift" in checked.out
    return check(
        ok,
        f"import: {_said(imported)}; reindex killed mid-way; recalled after: {found}; "
        f"check: {(checked.out.strip().splitlines() or [checked.one_line()])[-1]}",
        figures(memories=exchanges),
    )


def _stall() -> Any:
    from testkit.llm_server import Stall

    return Stall(120)


@case(
    "poison",
    "lorebook-20000",
    did="`personae personality import` of a card whose lorebook has 20,000 entries of 5 keys; then the "
    "card's parts and prompt of a reply, as ChatService builds them (off the event loop)",
    expected="the import keeps the first 1,000 entries and says how many it left out; each reply's prompt "
    "holds the entry its message named; a reply's lore work is bounded (figures: its time per reply)",
)
async def big_lorebook(lab: Lab, scale: Scale) -> Outcome:
    from memory.chat.card_parts import build_context_off_loop, card_parts_off_loop
    from memory.chat.prompt import ContextBudget, HistoryMessage

    entries = scale.pick(2_000, 20_000)
    # Five keys an entry: with 30 the card is over the 4 MiB of JSON a card may have, and refused whole.
    book = [{"keys": [f"word{n}x{k}" for k in range(5)], "content": f"Entry {n}."} for n in range(entries)]
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "Keeper", "character_book": {"entries": book}},
    }
    path = lab.workdir / "big-card.json"
    path.write_text(json.dumps(card), encoding="utf-8")
    env = await _env(lab, "lore")
    imported = await lab.cli("personality", "import", str(path), **env)
    exported = await lab.cli("personality", "export", "keeper", **env)
    kept = len(json.loads(exported.out)["data"]["character_book"]["entries"]) if exported.code == 0 else -1
    stored = json.loads(exported.out)["data"] if exported.code == 0 else {}
    budget = ContextBudget.for_window(128_000, share=0.8, memory_share=0.2, lore_share=0.2, reply_tokens=1000)
    took: list[float] = []
    named = 0  # replies whose prompt holds the entry their message named
    for n in range(5):
        history = [HistoryMessage(role="user", content=f"Tell me of word{n * 7}x3.", author_name="U")]
        card_read = json.loads(json.dumps(stored))  # a new dict every reply, as PostgreSQL gives it
        started = time.perf_counter()
        parts = await card_parts_off_loop(
            card_read, display_name="Keeper", recent=[history[0].content], user="U", default_scan_depth=2
        )
        await build_context_off_loop(
            system_prompt="You are Keeper.", user_name="U", memories=[], summary=None, history=history,
            budget=budget, model=None, card=parts,
        )  # fmt: skip
        took.append(time.perf_counter() - started)
        named += [lore.text for lore in parts.lore] == [f"Entry {n * 7}."]
    reported = f"({entries - 1000:,}: a lorebook holds at most 1,000" in imported.out
    ok = imported.code == 0 and kept == 1000 and reported and named == 5
    return check(
        ok,
        f"import: {_said(imported)}, {kept} entries kept, the cap reported: {reported}; "
        f"the entry named in the prompt: {named} of 5 replies",
        figures(
            entries=f"{entries:,}", reply_lore_ms=f"{sorted(took)[len(took) // 2] * 1000:.0f} (median of 5)"
        ),
    )
