"""`personae personality lore` and the character card commands as users run them: in-process through
`main()` against a scratch database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main
from tests.memory.owners.cards import SERAPHINA_V3


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, scratch_database_url: str, tmp_path: Path) -> Path:
    monkeypatch.setenv("DATABASE_URL", scratch_database_url)
    monkeypatch.setenv("PERSONAE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_lore_list_add_edit_enable_disable(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "personality", "create", "Plain", "--prompt", "You are Plain.")[0] == 0
    assert run(capsys, "personality", "lore", "plain", "list") == (
        0,
        "No lore yet. Add an entry: personae personality lore plain add --keys KEYS --text TEXT\n",
        "",
    )
    code, out, err = run(
        capsys, "personality", "lore", "plain", "add", "--keys", "Porto, /lisbo(a|n)/i", "--text",
        "Plain grew up in Porto.", "--position", "after",
    )  # fmt: skip
    assert (code, out, err) == (0, "Added lore entry 1 (Porto, /lisbo(a|n)/i, after).\n", "")
    code, out, _ = run(
        capsys,
        "personality",
        "lore",
        "plain",
        "add",
        "--constant",
        "--text",
        "Plain is 30.",
        "--comment",
        "Age",
    )
    assert out == "Added lore entry 2 (always, before).\n"
    code, out, _ = run(
        capsys, "personality", "lore", "plain", "edit", "1", "--secondary-keys", "rain", "--logic", "not-any"
    )
    assert out == "Changed lore entry 1 (Porto, /lisbo(a|n)/i (not any: rain), after).\n"
    assert (
        run(capsys, "personality", "lore", "plain", "disable", "2")[1] == "Lore entry 2 (Age) is disabled.\n"
    )
    code, listed, _ = run(capsys, "personality", "lore", "plain", "list")
    assert listed.splitlines() == [
        "#    ON   KEYS                                     WHERE    ORDER  ENTRY",
        "1    on   Porto, /lisbo(a|n)/i (not any: rain)     after    100    Plain grew up in Porto.",
        "2    off  always                                   before   100    Age: Plain is 30.",
    ]
    assert run(capsys, "personality", "lore", "plain", "enable", "2")[1] == "Lore entry 2 (Age) is enabled.\n"

    for argv, error in (
        (("edit", "9", "--text", "x"), "There is no lore entry 9; the lore list shows the entries' numbers."),
        (("edit", "1"), "Nothing to change: give at least one field to edit."),
        (("add", "--keys", "/(/", "--text", "t"), "The key '/(/' is not a valid regular expression"),
        (("add", "--text", "t"), "A lore entry needs keys that activate it, unless it is constant."),
    ):
        code, out, err = run(capsys, "personality", "lore", "plain", *argv)
        assert code == 1 and out == "" and err.startswith(f"personae: {error}") and err.count("\n") == 1
    code, _, err = run(capsys, "personality", "lore", "nobody", "list")
    assert (code, err) == (
        1,
        "personae: No personality named 'nobody'; `personae personality list` shows them.\n",
    )

    # The lore goes out with the card and comes back with it.
    card = cli_env / "plain.json"
    assert run(capsys, "personality", "export", "plain", "-o", str(card))[0] == 0
    assert run(capsys, "personality", "delete", "plain", "--yes")[0] == 0  # a copy beside it reads alike
    assert run(capsys, "personality", "import", str(card), "--name", "plain-2")[0] == 0
    assert run(capsys, "personality", "lore", "plain-2", "list")[1] == listed.replace(
        "off  always", "on   always"
    )


def test_card_import_report_and_png_export(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    card = cli_env / "seraphina.json"
    card.write_text(json.dumps(SERAPHINA_V3))
    code, out, err = run(capsys, "personality", "import", str(card))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Imported V3 card 'Seraphina' as personality 'seraphina' (verbatim)."
    assert lines[2].startswith("uses:     system prompt, description,") and "lorebook (5 entries" in lines[2]
    assert lines[3].startswith("not used: creator notes,") and lines[3].endswith("(kept; exported back)")
    assert lines[4] == (
        "not kept: asset emotion/happy (embeded://assets/emotion/images/happy.png): its file is not stored"
    )
    assert lines[5] == "avatar:   -"

    png = cli_env / "seraphina.png"
    assert run(capsys, "personality", "export", "seraphina", "-o", str(png)) == (0, f"Wrote {png}.\n", "")
    assert run(capsys, "personality", "delete", "seraphina", "--yes")[0] == 0  # a copy beside it reads alike
    code, out, err = run(capsys, "personality", "import", str(png), "--name", "sera-png")
    assert code == 0, err
    assert out.startswith("Imported V3 card 'Seraphina' as personality 'sera-png' (verbatim).")
    code, exported, _ = run(capsys, "personality", "export", "sera-png")
    assert json.loads(exported)["data"] == SERAPHINA_V3["data"]

    code, _, err = run(capsys, "personality", "export", "sera-png", "--image", str(png))
    assert (code, err) == (1, "personae: --image puts the card in a picture: give -o FILE.png too.\n")
    code, _, err = run(capsys, "personality", "export", "sera-png", "-o", str(png), "--image", str(card))
    assert (code, err) == (1, "personae: The picture is not a PNG the card can go in: Not a PNG file.\n")
