"""`personae memory correct` supersedes what else said the wrong claim (issue 31), and `memory list` /
`memory show` carry the mark: since when, and by which correction. In process, as tests/test_memory_cli.py
runs the command line, on a scratch PostgreSQL and Qdrant Edge."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.cli import run
from tests.test_memory_commands_cli import recalled_json, transcript


def test_memory_show_and_list_mark_what_a_correction_superseded(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "personality", "create", "Sage")
    said = [
        ("a1", "user", "My horse is called Thistle."),
        ("a2", "assistant", "A lovely name."),
        ("a3", "user", "Thistle won a blue ribbon at the county show."),
        ("a4", "assistant", "Well done!"),
    ]
    chat = transcript(cli_env / "a.jsonl", said, day=1)
    assert run(capsys, "import", str(chat), "--personality", "sage")[0] == 0
    [named] = [str(m["id"]) for m in recalled_json(capsys, "horse called") if "called" in str(m["content"])]
    assert run(capsys, "memory", "correct", named, "--user", "1001", "My horse is called Bramble.")[0] == 0

    code, out, _ = run(capsys, "memory", "list", "--user", "1001", "--limit", "10")
    assert code == 0
    [ribbon] = [line for line in out.splitlines() if "ribbon" in line]
    assert "[superseded]" in ribbon
    ribbon_id = ribbon.split()[0]
    code, out, _ = run(capsys, "memory", "show", ribbon_id, "--user", "1001")
    assert code == 0 and "superseded:  " in out and 'by "My horse is called Bramble."' in out
    code, out, _ = run(capsys, "memory", "show", named, "--user", "1001")
    assert code == 0 and "superseded" not in out
