"""What an import or a recall meets beyond the file: the embedding endpoint down, a summarizer answering
text PostgreSQL cannot hold, a query that is not UTF-8 on the command line. `personae` runs as a
subprocess where the fault is in its process (its settings, its argv; at the quick scale the runs
around it are in this process); a failure must be one line that says what was kept and what to do,
never a traceback, and nothing may be lost."""

from __future__ import annotations

import json
import socket

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import run_command
from bench.reliability_cases.lab import Lab
from testkit.llm_server import Reply

EXCHANGE = (
    {
        "id": "u1",
        "role": "user",
        "content": "My sister Ines moves to Lisbon on the 14th of March, and her cat Pimenta comes with her "
        "on the train; she asked me to keep her bike, a green Brompton, until she finds a flat near Alfama.",
        "user_id": "5001",
    },
    {
        "id": "a1",
        "role": "assistant",
        "content": "Lisbon on the 14th, with Pimenta on the train: and the green Brompton stays with you.",
    },
)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _personality(lab: Lab, name: str, mode: str = "verbatim") -> str:
    await lab.runtime.personalities.create(name, memory_mode=mode)
    path = lab.workdir / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in EXCHANGE), encoding="utf-8")
    return name


async def _state(lab: Lab, name: str) -> tuple[int, int, int]:
    [row] = await lab.rows(
        "SELECT (SELECT count(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "JOIN personalities p ON p.id = c.personality_id WHERE p.name = :n) AS messages, "
        "(SELECT count(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "JOIN personalities p ON p.id = c.personality_id WHERE p.name = :n "
        "AND m.memory_processed_at IS NULL) AS pending, "
        "(SELECT count(*) FROM memories m JOIN personalities p ON p.id = m.personality_id "
        "WHERE p.name = :n) AS memories",
        n=name,
    )
    return int(row["messages"]), int(row["pending"]), int(row["memories"])


@case(
    "import-faults",
    "embedding-endpoint-down",
    did="issue 20 item 15: `personae import` with the embedding endpoint's port closed; then the same "
    "import with the endpoint back",
    expected="the first says in one line that the messages are stored and how to finish (exit 1, no "
    "traceback); the second forms every memory once, nothing pending",
)
async def embedding_endpoint_down(lab: Lab, scale: Scale) -> Outcome:
    name = await _personality(lab, "if-embed-down")
    path = str(lab.workdir / f"{name}.jsonl")
    down = await lab.cli(
        "import", path, "--personality", name, embedding_api_base=f"http://127.0.0.1:{_closed_port()}/v1"
    )
    between = await _state(lab, name)
    # The first run's one line and exit are its process's; the second only finishes (in this process
    # at the quick scale).
    back = await lab.command(scale, "import", path, "--personality", name)
    after = await _state(lab, name)
    said = down.one_line()
    ok = (
        down.code == 1
        and not down.traceback
        and said.startswith("personae: ")
        and "stored" in said
        and between == (2, 2, 0)
        and back.code == 0
        and after == (2, 0, 1)
    )
    return check(
        ok,
        f"down: exit {down.code}, {said[:200]!r}; then {between[0]} messages stored, {between[1]} pending; "
        f"back: exit {back.code}, {after[2]} memory, {after[1]} pending",
    )


@case(
    "import-faults",
    "summary-nul-and-lone-surrogate",
    did="issue 20 item 15: in a summarized personality, the summarizer answers a summary holding a NUL "
    "and a lone surrogate (JSON-escaped \\u0000, \\ud800), on an import",
    expected="the memory is formed once from that summary with those characters removed or replaced "
    "(nothing pending, no traceback): they reach neither the embedder nor the database",
)
async def summary_nul_and_surrogate(lab: Lab, scale: Scale) -> Outcome:
    name = await _personality(lab, "if-summary", "summarized")
    summary = "Ines moves to Lisbon on 14 March\u0000 with Pimenta \ud800 and leaves a green Brompton."
    lab.llm.script(Reply(summary))
    code, _, err = await run_command(
        lab.runtime, "import", str(lab.workdir / f"{name}.jsonl"), "--personality", name
    )
    state = await _state(lab, name)
    rows = await lab.rows(
        "SELECT content FROM memories m JOIN personalities p ON p.id = m.personality_id WHERE p.name = :n",
        n=name,
    )
    content = rows[0]["content"] if rows else ""
    ok = (
        code == 0
        and state == (2, 0, 1)
        and "Lisbon" in content
        and "\x00" not in content
        and "\ud800" not in content
    )
    return check(
        ok, f"exit {code}{' ' + err if err else ''}; {state[2]} memory, {state[1]} pending: {content!r}"
    )


@case(
    "import-faults",
    "recall-query-not-utf8",
    did="issue 20 item 15, issue 33 item 7: `personae recall` (a subprocess) whose query argument holds a "
    "byte that is not UTF-8 (0xFF: Python reads it as a lone surrogate)",
    expected="refused in one line naming UTF-8 (exit 2, as argparse's own errors), no traceback; the same "
    "query in UTF-8 is answered",
)
async def recall_query_not_utf8(lab: Lab, scale: Scale) -> Outcome:
    name = await _personality(lab, "if-recall")
    # Only the refused recall needs its own argv (a process); the import and the recall in UTF-8 run in
    # this process at the quick scale.
    imported = await lab.command(scale, "import", str(lab.workdir / f"{name}.jsonl"), "--personality", name)
    refused = await lab.cli(
        "recall", "Brompton \udcff Lisbon", "--personality", name, "--user", "5001", "--json"
    )
    argv = ("recall", "Brompton Lisbon", "--personality", name, "--user", "5001", "--json")
    found = await lab.command(scale, *argv)
    ids = json.loads(found.out)["memories"][0]["source_message_ids"] if found.code == 0 and found.out else []
    one_line = refused.one_line()
    ok = (
        imported.code == 0
        and refused.code == 2
        and not refused.traceback
        and "UTF-8" in one_line
        and found.code == 0
        and ids == ["u1", "a1"]
    )
    return check(
        ok,
        f"import exit {imported.code}; refused exit {refused.code}: {one_line[:120]}; "
        f"recall exit {found.code}: {ids!r}",
    )
