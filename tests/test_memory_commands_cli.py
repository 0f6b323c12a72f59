"""The user's memory commands from the command line, as /memory gives them in Discord (list, search,
show, pin, correct, forget, export, used, fresh), run in-process through `main()` against a scratch
database and a fresh embedded index; the import and recall contract: tests/test_memory_cli.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.cli.demo import EXAMPLES_DIR
from testkit.cli import run

SAGE = EXAMPLES_DIR / "sage.jsonl"


def test_a_users_memories_are_listed_searched_pinned_corrected_forgotten_and_exported_as_in_discord(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`/memory` from the command line: each command names the user, and only ever reaches theirs."""
    run(capsys, "personality", "create", "Sage", "--memory-mode", "summarized")
    assert run(capsys, "import", str(SAGE), "--personality", "sage")[0] == 0

    code, out, _ = run(capsys, "memory", "list", "--user", "1002", "--limit", "2")
    assert code == 0
    header, columns, *rows = out.splitlines()
    assert header.startswith("Memories of user 1002, newest first: 1 to 2 of ")
    assert columns.split() == ["ID", "DATE", "PERSONALITY", "MEMORY"]
    assert rows[-1] == "More: --offset 2."
    newest = rows[0].split()[0]
    assert len(newest) == 8  # its shortest unique prefix, as git shows a commit

    code, out, _ = run(
        capsys, "memory", "search", "what is my bonsai called", "--user", "1002", "--limit", "3"
    )
    assert code == 0
    assert out.startswith("Memories of user 1002 matching 'what is my bonsai called', best first:\n")
    bonsai = out.splitlines()[2].split()[0]
    code, out, _ = run(capsys, "memory", "show", bonsai, "--user", "1002")
    assert "Gerald" in out and "pinned:      no" in out
    # Alice cannot reach Bob's memory by its id, whatever the command.
    for command in (["show", bonsai], ["pin", bonsai], ["forget", bonsai], ["correct", bonsai, "mine now"]):
        code, _, err = run(capsys, "memory", *command, "--user", "1001")
        missing = f"personae: User 1001 has no memory whose id starts with {bonsai}.\n"
        assert (code, err) == (1, missing), command

    assert run(capsys, "memory", "pin", bonsai, "--user", "1002")[0] == 0
    code, out, _ = run(
        capsys, "memory", "correct", bonsai, "--user", "1002", "My bonsai is called Gerald Junior."
    )
    assert code == 0, out
    code, out, _ = run(capsys, "memory", "show", bonsai, "--user", "1002")
    assert "pinned:      yes" in out and "edited:      yes" in out
    assert out.endswith("My bonsai is called Gerald Junior.\n")
    code, out, _ = run(capsys, "memory", "search", "Gerald Junior", "--user", "1002", "--limit", "1")
    assert out.splitlines()[2].split()[:1] == [bonsai]
    assert "[pinned] [edited] My bonsai is called Gerald Junior." in out

    exported = cli_env / "bob.jsonl"
    code, out, _ = run(
        capsys, "memory", "export", "--user", "1002", "--personality", "sage", "-o", str(exported)
    )
    assert code == 0 and out.startswith("Wrote ")
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    assert {r.get("user_id") for r in records if "role" in r} == {"1002"}  # Bob's lines only

    code, out, _ = run(capsys, "memory", "forget", newest, "--user", "1002")
    assert (code, out) == (0, "Forgotten. It will not come back in recall.\n")
    assert newest not in run(capsys, "memory", "list", "--user", "1002", "--limit", "100")[1]
    code, _, err = run(capsys, "memory", "forget", "all", "--user", "1002")
    assert code == 1 and "Pass --yes to confirm" in err  # no terminal to ask
    code, out, _ = run(capsys, "memory", "forget", "all", "--user", "1002", "--personality", "sage", "--yes")
    assert code == 0 and out.startswith("Deleted ") and out.endswith(" memories of user 1002 with Sage.\n")
    assert run(capsys, "memory", "list", "--user", "1002")[1] == "No memories of user 1002.\n"
    assert run(capsys, "memory", "list", "--user", "1001")[1].startswith(
        "Memories of user 1001"
    )  # Alice's stay
    code, out, _ = run(capsys, "reindex", "--check")
    assert code == 0 and "no drift" in out  # forgotten memories left the index too

    code, out, _ = run(capsys, "personality", "delete", "sage", "--yes")
    assert code == 0 and out.startswith("Deleted personality 'sage' with its ")
    code, out, _ = run(capsys, "reindex", "--check")
    assert "points in index: 0" in out and "no drift" in out


def transcript(path: Path, lines: list[tuple[str, str, str]], *, day: int) -> Path:
    """(id, role, text) lines of user 1001 with Sage as a JSONL transcript, a minute apart."""
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": message_id,
                    "role": role,
                    "content": text,
                    "timestamp": f"2024-05-{day:02d}T18:{n:02d}:00Z",
                    "author": "Alice" if role == "user" else None,
                    "user_id": "1001",
                }
            )
            + "\n"
            for n, (message_id, role, text) in enumerate(lines)
        )
    )
    return path


def recalled_json(capsys: pytest.CaptureFixture[str], query: str) -> list[dict[str, object]]:
    code, out, _ = run(capsys, "recall", query, "--personality", "sage", "--user", "1001", "--json")
    assert code == 0
    return json.loads(out)["memories"]  # type: ignore[no-any-return]


def test_a_forgotten_memory_imported_again_in_other_words_stays_forgotten(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "personality", "create", "Sage")
    first = [
        ("a1", "user", "My sister Leila moved to Porto in March."),
        ("a2", "assistant", "Porto! What a place to land."),
        ("a3", "user", "Leila is training for the Berlin marathon in October."),
        ("a4", "assistant", "Good luck to her!"),
    ]
    assert (
        run(capsys, "import", str(transcript(cli_env / "a.jsonl", first, day=1)), "--personality", "sage")[0]
        == 0
    )
    [claim, *_] = recalled_json(capsys, "Where did my sister Leila move?")
    assert "Porto" in str(claim["content"])
    assert run(capsys, "memory", "forget", str(claim["id"]), "--user", "1001")[0] == 0

    again = [
        ("b1", "user", "Leila, my sister, relocated to Porto back in March."),
        ("b2", "assistant", "Noted!"),
    ]
    code, out, _ = run(
        capsys, "import", str(transcript(cli_env / "b.jsonl", again, day=2)), "--personality", "sage"
    )
    # Stored superseded (said before the forget, as its date says): kept, never recalled.
    assert code == 0 and "memories stored: 1" in out
    for query in ("Where did my sister Leila move?", "Leila Porto"):
        assert all("Porto" not in str(m["content"]) for m in recalled_json(capsys, query))
    assert "marathon" in str(recalled_json(capsys, "What race is Leila training for?")[0]["content"])


def test_a_replys_receipt_and_fresh_mode_from_the_command_line(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "personality", "create", "Sage")
    said = [
        ("a1", "user", "My dog Biscuit turns 4 on May 12."),
        ("a2", "assistant", "Happy early birthday, Biscuit!"),
        ("q1", "user", "When is Biscuit's birthday?"),
        ("q2", "assistant", "May 12!"),
    ]
    assert (
        run(capsys, "import", str(transcript(cli_env / "a.jsonl", said, day=1)), "--personality", "sage")[0]
        == 0
    )

    async def answered_with_memories() -> str:
        # What the chat turn records once its reply is stored (memory.recall.receipts).
        from bot.runtime import open_core, open_memory_services
        from bot.settings import load_bot_settings

        async with open_core(load_bot_settings()) as core, open_memory_services(core) as runtime:
            sage = await runtime.personalities.get("sage")
            found = await runtime.memory.recall(
                personality_id=sage.id, user_id="1001", query="When is Biscuit's birthday?", limit=3
            )
            # As the chat turn does: not the memory of the very exchange being answered.
            used = [m for m in found if "q1" not in m.source_message_ids][:1]
            receipt = await runtime.memory.reply_receipt(user_id="1001", message_id="q2")
            await runtime.memory.record_reply_memories(
                conversation_id=receipt.conversation_id, message_id="q1", memories=used
            )
            return str(used[0].id)

    memory_id = asyncio.run(answered_with_memories())
    code, out, _ = run(capsys, "memory", "used", "q2", "--user", "1001")
    assert code == 0
    header, columns, row = out.splitlines()[:3]
    assert header in ("The reply to message q1 used 1 memory:", "The reply to message q1 used 2 memories:")
    assert columns.split() == ["ID", "DATE", "WHY", "MEMORY"]
    assert row.split()[:3] == [memory_id[:8], "2024-05-01", "#1"] and "Biscuit turns 4" in row
    code, _, err = run(capsys, "memory", "used", "q2", "--user", "1002")
    assert (code, err) == (1, "personae: Only the person this reply answered can see the memories it used.\n")

    code, out, _ = run(capsys, "memory", "fresh", "on", "--user", "1001", "--personality", "sage")
    assert (code, out) == (
        0,
        "Fresh mode is on for user 1001 with Sage: replies use none of their memories "
        "(new ones still form, unless incognito is on).\n",
    )
    # `recall` still shows what matches, and says first that a reply would recall none of it.
    code, out, _ = run(capsys, "recall", "Biscuit", "--personality", "sage", "--user", "1001")
    fresh = "(fresh mode is on for user 1001 with Sage: a reply recalls none of these; "
    assert code == 0 and out.startswith(fresh) and "Biscuit" in out.split("\n", 1)[1], out
    code, out, _ = run(capsys, "memory", "fresh", "off", "--user", "1001")
    assert (
        out == "Fresh mode is off for user 1001 with every personality: replies use their memories again.\n"
    )
