"""Backups that must restore: a user's whole-account export (what `/memory export` sends) of two
personalities, imported with `personae import` (a subprocess) into a fresh deployment, and into the
same one again; and an export given to another personality on purpose.

The words hold every character `str.splitlines()` breaks a line at (U+2028, U+2029, U+0085 raw in
JSON; the control ones JSON escapes), and the two personalities' transcripts reuse the same ids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import figures, run_command
from bench.reliability_cases.lab import Lab, prepare_database, rows_at

BREAKERS = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e"
PERSONALITIES = ("rt-lilith", "rt-sage")
COMPARED = (
    "SELECT p.name, m.user_id, m.guild_id, m.channel_id, m.is_dm, m.content, m.content_verbatim, "
    "m.source_message_ids FROM memories m JOIN personalities p ON p.id = m.personality_id "
    "WHERE m.user_id = :user ORDER BY p.name, m.content"
)


def transcript(personality: str, exchanges: int, user: str = "A") -> list[dict[str, Any]]:
    """One user's exchanges with a personality, a third in a guild channel, the rest in DMs; the same
    ids whichever the personality, every line breaker in the words."""
    lines = []
    for i in range(exchanges):
        where = {"guild_id": "G", "channel_id": "C"} if i % 3 == 0 else {}
        words = f"{personality} note {i}:{BREAKERS[i % len(BREAKERS)]}the locker code is {1000 + i}"
        lines.append({"id": f"u{i}", "role": "user", "content": words, "user_id": user, **where})
        lines.append(
            {
                "id": f"a{i}",
                "role": "assistant",
                "content": f"{1000 + i},{BREAKERS}noted",
                "reply_to": f"u{i}",
                **where,
            }
        )
    return lines


def _key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        *(
            row[k]
            for k in ("name", "user_id", "guild_id", "channel_id", "is_dm", "content", "content_verbatim")
        ),
        tuple(row["source_message_ids"]),
    )


@case(
    "round-trips",
    "whole-account-export",
    did="one user's memories with two personalities (quick 200, full 10,000 in all; DMs and a guild "
    "channel; the same ids in both transcripts; every line breaker in the words) exported as "
    "/memory export does, then `personae import EXPORT` (no --personality) into a fresh deployment, "
    "and into the same one again",
    expected="every exported line reads back as one line; the fresh deployment holds the same memories, "
    "each with its own personality, user, venue, words and source ids (0 missing, 0 extra, 0 moved); "
    "the import into the same deployment stores nothing new",
)
async def whole_account_export(lab: Lab, scale: Scale) -> Outcome:
    rt = lab.runtime
    exchanges = scale.pick(100, 5_000)  # per personality
    for name in PERSONALITIES:
        await rt.personalities.create(name)
        text = "".join(json.dumps(line) + "\n" for line in transcript(name, exchanges))
        path = lab.workdir / f"{name}.jsonl"
        path.write_text(text, encoding="utf-8")
        code, _, err = await run_command(rt, "import", str(path), "--personality", name)
        if code:
            return check(False, f"setting up {name}: exit {code}: {err}")
    before = await lab.rows(COMPARED, user="A")
    exported = await rt.transfer.export_lines(user_id="A")
    whole = "\n".join(exported) + "\n"
    broken = sum(len(line.splitlines()) != 1 for line in exported)
    backup = lab.workdir / "export.jsonl"
    backup.write_text(whole, encoding="utf-8")

    url = await lab.cluster.create_database("round_trip_fresh")
    await prepare_database(url, *PERSONALITIES)
    restored = await lab.cli("import", str(backup), database_url=url, personae_data_dir=lab.workdir / "fresh")
    after = await rows_at(url, COMPARED.replace(":user", "'A'"))
    mine, theirs = {_key(r) for r in before}, {_key(r) for r in after}
    by_personality = {name: sum(r["name"] == name for r in after) for name in PERSONALITIES}
    again = await run_command(rt, "import", str(backup))
    ok = (
        broken == 0
        and len(before) == 2 * exchanges
        and restored.code == 0
        and not restored.traceback
        and mine == theirs
        and len(after) == len(before)
        and "(0 new)" in again[1]
    )
    return check(
        ok,
        f"{len(before)} memories exported in {len(exported)} lines, {broken} broken; fresh import exit "
        f"{restored.code}{': ' + restored.one_line()[:160] if restored.code else ''}; restored "
        f"{len(after)} ({', '.join(f'{n} {c}' for n, c in by_personality.items())}): {len(mine - theirs)} "
        f"missing, {len(theirs - mine)} extra or changed; again into the same deployment: "
        f"{' / '.join(again[1].strip().splitlines()[:1]) or again[2]}",
        figures(
            memories=len(before), export_lines=len(exported), export_mib=f"{len(whole.encode()) / 2**20:.1f}"
        ),
    )


@case(
    "round-trips",
    "export-into-another-personality",
    did="one personality's export imported with --personality naming another one; the whole-account "
    "export of two personalities imported with --personality",
    expected="the one personality's memories become the other's (the user asked); the export of two "
    "is refused in one line that says to import it without --personality, nothing written",
)
async def export_into_another(lab: Lab, scale: Scale) -> Outcome:
    rt = lab.runtime
    for name in ("rt-from", "rt-to", "rt-other"):
        await rt.personalities.create(name)
    path = lab.workdir / "from.jsonl"
    # A user of its own: the area's other case leaves user A's memories of other personalities behind.
    lines = transcript("rt-from", 3, user="B")
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    await run_command(rt, "import", str(path), "--personality", "rt-from")
    await run_command(rt, "import", str(path), "--personality", "rt-other")
    one = lab.workdir / "one.jsonl"
    one.write_text(
        "\n".join(
            await rt.transfer.export_lines(
                user_id="B", personality_id=(await rt.personalities.get("rt-from")).id
            )
        ),
        encoding="utf-8",
    )
    moved = await run_command(rt, "import", str(one), "--personality", "rt-to")
    count_to = int(
        await lab.scalar(
            "SELECT count(*) FROM memories m JOIN personalities p ON p.id = m.personality_id "
            "WHERE p.name = 'rt-to'"
        )
    )
    both = lab.workdir / "both.jsonl"
    both.write_text("\n".join(await rt.transfer.export_lines(user_id="B")), encoding="utf-8")
    before = int(await lab.scalar("SELECT count(*) FROM messages"))
    refused = await run_command(rt, "import", str(both), "--personality", "rt-to")
    after = int(await lab.scalar("SELECT count(*) FROM messages"))
    ok = (
        moved[0] == 0
        and count_to == 3
        and refused[0] == 1
        and "without --personality" in refused[2]
        and before == after
    )
    return check(
        ok,
        f"into another: exit {moved[0]}, {count_to} memories there; the export of several with "
        f"--personality: exit {refused[0]}, {refused[2]!r}; messages written: {after - before}",
    )
