"""Issue 33, item 2: a big lorebook holds no reply. A card's book is capped at import as `lore add` caps
it (the cap and what was left out in the report), and keys are found by one automaton pass per text
with the same rules as before (whole words, phrases, case)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main
from memory.owners.lore import MAX_ENTRIES, match_lore, read_lorebook


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, scratch_database_url: str, tmp_path: Path) -> Path:
    monkeypatch.setenv("DATABASE_URL", scratch_database_url)
    monkeypatch.setenv("PERSONAE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def big_card(entries: int) -> dict[str, object]:
    book = [
        {"keys": [f"place{n}", f"thing{n}"], "content": f"Fact number {n}.", "insertion_order": n}
        for n in range(entries)
    ]
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "Keeper", "description": "A keeper of facts.", "character_book": {"entries": book}},
    }


def test_a_card_lorebook_is_capped_at_import_as_lore_add_caps_it(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    card = cli_env / "keeper.json"
    card.write_text(json.dumps(big_card(MAX_ENTRIES + 250)))
    code, out, err = run(capsys, "personality", "import", str(card))
    assert code == 0, err
    assert f"lorebook ({MAX_ENTRIES} entries)" in out
    assert f"lorebook entries past the first {MAX_ENTRIES:,} (250: a lorebook holds at most" in out
    code, exported, _ = run(capsys, "personality", "export", "keeper")
    kept = json.loads(exported)["data"]["character_book"]["entries"]
    assert len(kept) == MAX_ENTRIES and kept[-1]["content"] == f"Fact number {MAX_ENTRIES - 1}."


def active(entries: list[dict[str, object]], said: str) -> list[str]:
    book = read_lorebook({"character_book": {"entries": entries}})
    return [lore.text for lore in match_lore(book, [said], default_scan_depth=2, char="K", user="U")]


def test_keys_match_whole_words_phrases_and_case_as_before() -> None:
    entries: list[dict[str, object]] = [
        {"keys": ["cat"], "content": "whole word cat"},
        {"keys": ["dog"], "content": "part of a word", "extensions": {"match_whole_words": False}},
        {"keys": ["red fox"], "content": "a phrase"},
        {"keys": ["Rome"], "content": "case counts", "case_sensitive": True},
        {"keys": ["c++"], "content": "punctuation in a key"},
        {"keys": ["owl"], "content": "an owl nowhere"},
    ]
    assert active(entries, "Concatenate the hotdogs; a Red Fox saw rome and C++, my cat!") == [
        "whole word cat",
        "part of a word",
        "a phrase",
        "punctuation in a key",
    ]
    assert active(entries, "cat_s, scat, Rome") == ["case counts"]


def test_every_key_of_a_big_book_is_found_in_one_pass() -> None:
    """A card from before the cap (stored uncapped) still answers: the matching keys, nothing else."""
    card = big_card(20_000)["data"]
    assert isinstance(card, dict)
    book = read_lorebook(card)
    found = match_lore(
        book, ["I went to place19999 and saw thing7"], default_scan_depth=2, char="K", user="U"
    )
    assert sorted(lore.text for lore in found) == ["Fact number 19999.", "Fact number 7."]


def test_a_card_of_almost_4_mb_exported_to_png_and_json_imports_again(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33, item 3: a 3.98 MB card exported as PNG (two base64 copies of it) and as indented JSON
    was refused by `personality import` (over 8 MiB; over 4 MiB of JSON)."""
    book = [
        {"keys": [f"k{n}x{k}" for k in range(30)], "content": f"{n} " + "lore " * 720}
        for n in range(MAX_ENTRIES)
    ]
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "Big", "character_book": {"entries": book}},
    }
    source = cli_env / "big.json"
    source.write_text(json.dumps(card, separators=(",", ":")))
    assert 3_900_000 < source.stat().st_size < 4 * 2**20
    code, _, err = run(capsys, "personality", "import", str(source))
    assert code == 0, err
    png, indented = cli_env / "big.png", cli_env / "big-again.json"
    assert run(capsys, "personality", "export", "big", "-o", str(png))[0] == 0
    assert run(capsys, "personality", "export", "big", "-o", str(indented))[0] == 0
    assert png.stat().st_size > 8 * 2**20 and indented.stat().st_size > 4 * 2**20  # what used to be refused
    for name, path in (("png", png), ("json", indented)):
        code, out, err = run(
            capsys, "personality", "import", str(path), "--name", f"big-{name}", "--display-name", f"B {name}"
        )
        assert code == 0, err
        assert f"lorebook ({MAX_ENTRIES} entries)" in out
