"""A card's picture through the CLI (issue 34): `personality import` keeps the 400x600 art a PNG card
came in, `export -o x.png` writes the card back into it (not the 64x64 placeholder), and the export
imports back into a personality whose own export has the same pixels again."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from memory.owners.cards import parse_card
from testkit.cli import run
from tests.memory.owners.cards import SERAPHINA_V2


def card_art(width: int = 400, height: int = 600) -> bytes:
    """A 400x600 portrait with a card in a `chara` tEXt chunk, written by Pillow as other tools do;
    every pixel differs from its neighbours, so a picture swapped for another shows."""
    image = Image.new("RGB", (width, height))
    image.putdata(
        [((x * 7) % 256, (y * 3) % 256, (x * y) % 256) for y in range(height) for x in range(width)]
    )
    info = PngInfo()
    info.add_text("chara", base64.b64encode(json.dumps(SERAPHINA_V2).encode()).decode())
    out = io.BytesIO()
    image.save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def pixels(data: bytes) -> tuple[tuple[int, int], bytes]:
    with Image.open(io.BytesIO(data)) as image:
        return image.size, image.convert("RGB").tobytes()


def test_a_cards_picture_is_exported_back_and_round_trips(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = cli_env
    card = tmp_path / "seraphina.png"
    card.write_bytes(card_art())
    original = pixels(card.read_bytes())
    assert original[0] == (400, 600)

    imported_code, imported_out, imported_err = run(capsys, "personality", "import", str(card))
    assert imported_code == 0, imported_err
    assert "picture:  kept" in imported_out

    out = tmp_path / "out.png"
    exported_code, _, exported_err = run(capsys, "personality", "export", "seraphina", "-o", str(out))
    assert exported_code == 0, exported_err
    assert pixels(out.read_bytes()) == original  # the card's own art, not the 64x64 placeholder
    back = parse_card(out.read_bytes())
    assert back.fields.name == "Seraphina" and back.fields.first_mes == SERAPHINA_V2["data"]["first_mes"]

    # The export imports back, picture and all: its own export has the same pixels again.
    again_code, again_out, again_err = run(
        capsys, "personality", "import", str(out), "--name", "sera-2", "--display-name", "Seraphina II"
    )
    assert again_code == 0, again_err
    assert "picture:  kept" in again_out
    out2 = tmp_path / "out2.png"
    second_code, _, second_err = run(capsys, "personality", "export", "sera-2", "-o", str(out2))
    assert second_code == 0, second_err
    assert pixels(out2.read_bytes()) == original
    assert parse_card(out2.read_bytes()).fields.name == "Seraphina II"

    # --image still wins over the card's own picture.
    other = tmp_path / "other.png"
    Image.new("RGB", (30, 20), (1, 2, 3)).save(other, format="PNG")
    given = tmp_path / "given.png"
    with_image_code, _, with_image_err = run(
        capsys, "personality", "export", "seraphina", "-o", str(given), "--image", str(other)
    )
    assert with_image_code == 0, with_image_err
    assert pixels(given.read_bytes()) == pixels(other.read_bytes())


def test_a_personality_made_without_a_card_exports_the_placeholder(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = cli_env
    created_code, _, created_err = run(capsys, "personality", "create", "plain", "--prompt", "You are plain.")
    assert created_code == 0, created_err
    out = tmp_path / "plain.png"
    exported_code, _, exported_err = run(capsys, "personality", "export", "plain", "-o", str(out))
    assert exported_code == 0, exported_err
    size, rgb = pixels(out.read_bytes())
    assert size == (64, 64) and set(rgb) == {0x8A, 0x8F, 0x99}
    assert parse_card(out.read_bytes()).fields.name == "plain"
