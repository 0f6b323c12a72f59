"""Issue 33, item 4: no traceback from what a file or a machine brings to `personae import`: JSON nested
100,000 deep on line 1 (a transcript, a SillyTavern header), a data directory whose path has a space.
Each is one line naming the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testkit.cli import run


@pytest.mark.parametrize("opening", ["[", '{"a":'])
@pytest.mark.parametrize("form", ["jsonl", "sillytavern"])
def test_json_nested_100000_deep_on_line_one_is_one_line(
    cli_env: Path, capsys: pytest.CaptureFixture[str], opening: str, form: str
) -> None:
    run(capsys, "personality", "create", "Lilith")
    closing = "]" if opening == "[" else "}"
    path = cli_env / "deep.jsonl"
    path.write_text(opening * 100_000 + ("1" if opening != "[" else "") + closing * 100_000 + "\n")
    code, _, err = run(
        capsys, "import", str(path), "--personality", "lilith", "--user", "7", "--format", form
    )
    assert code == 1 and "Traceback" not in err and "RecursionError" not in err
    [line] = err.strip().splitlines()
    assert "line 1: json nested too deeply for a transcript line" in line.lower()


def test_a_data_directory_whose_path_has_a_space_works(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERSONAE_DATA_DIR", str(cli_env / "data dir with spaces"))
    run(capsys, "personality", "create", "Lilith")
    path = cli_env / "t.jsonl"
    lines = [
        {"id": "1", "role": "user", "content": "my bike is blue", "user_id": "7"},
        {"id": "2", "role": "assistant", "content": "blue, noted", "reply_to": "1"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out, err = run(capsys, "import", str(path), "--personality", "lilith")
    assert code == 0 and "Traceback" not in err, err
    code, out, err = run(capsys, "recall", "bike", "--personality", "lilith", "--user", "7", "--json")
    assert code == 0 and "blue" in out, err
