"""Issue 33, item 7: after the disk filled, every command ended in a traceback (or, from the index's
lock file, "Cannot reach the embedded PostgreSQL ... run `personae db stop`", the wrong fix). Each now
says in one line where to free space.

The disk is real and really full: a 400 MB tmpfs mounted in a mount namespace of the test's own
(`unshare`, so nothing outside sees it), holding the data directory with its embedded PostgreSQL and its
Qdrant Edge index, then filled to the last byte. PostgreSQL then fails to extend a table ("could not
extend file ...: No space left on device", SQLSTATE 53100) and Qdrant Edge to write its lock file
(ENOSPC). The bot's log is checked on a real ENOSPC too: a write to /dev/full.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.disk_full import DiskFullLog

SCRIPT = r"""
set -u
mount -t tmpfs -o size=400m tmpfs "$DISK" || exit 97
export PERSONAE_DATA_DIR="$DISK/data"
stop() { "$PY" -m bot.cli db stop >/dev/null 2>&1; }
trap stop EXIT
"$PY" -m bot.cli personality create Sera --prompt "You are Sera." >"$OUT/setup.out" 2>&1 || exit 98
dd if=/dev/zero of="$DISK/filler" bs=1M >/dev/null 2>&1
n=0
while IFS= read -r line; do
  n=$((n + 1))
  eval "\"\$PY\" -m bot.cli $line" >"$OUT/$n.out" 2>"$OUT/$n.err"
  echo $? >"$OUT/$n.rc"
done <"$OUT/commands"
rm -f "$DISK/filler"
"""


# Mount a tmpfs on a folder of its own, then leave nothing behind: the folder outlives the namespace.
PROBE = (
    'd=$(mktemp -d) || exit 1; mount -t tmpfs -o size=1m tmpfs "$d"; r=$?; '
    'umount "$d" 2>/dev/null; rmdir "$d"; exit $r'
)


def _namespace() -> list[str] | None:
    """How to run a shell in a mount namespace of its own where it may mount a tmpfs; None if it can't."""
    if shutil.which("unshare") is None:
        return None
    tries = [["unshare", "--mount"]] if os.geteuid() == 0 else []
    tries.append(["unshare", "--user", "--map-current-user", "--mount"])
    for unshare in tries:
        probe = subprocess.run(
            [*unshare, "sh", "-c", PROBE],
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            return unshare
    return None


def test_every_command_on_a_full_disk_says_where_to_free_space(tmp_path: Path) -> None:
    unshare = _namespace()
    if unshare is None:
        pytest.skip("no way to mount a small tmpfs here (unshare --mount, or a user namespace)")
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    card = tmp_path / "big.json"  # ~4 MB of lore: PostgreSQL must extend its table to store it
    book = [{"keys": [f"k{n}"], "content": f"{n} " + "lore " * 800} for n in range(1000)]
    card.write_text(
        json.dumps({"spec": "chara_card_v2", "data": {"name": "Big", "character_book": {"entries": book}}})
    )
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"id": "1", "role": "user", "content": "hello", "user_id": "7"}) + "\n")
    commands = [
        f"personality import {card}",  # PostgreSQL: could not extend file
        f"import {transcript} --personality sera",  # Qdrant Edge: its lock file
        "reindex",
        "recall hello --personality sera --user 7",
    ]
    (out / "commands").write_text("".join(c + "\n" for c in commands))
    env = {**os.environ, "DISK": str(disk), "OUT": str(out), "PY": sys.executable}
    for variable in ("DATABASE_URL", "QDRANT_URL"):
        env.pop(variable, None)
    ran = subprocess.run(
        [*unshare, "bash", "-c", SCRIPT], env=env, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, (ran.stdout, ran.stderr, (out / "setup.out").read_text())
    said = (
        f"personae: The disk is full (No space left on device): free space on the disk holding "
        f"{disk / 'data'} (mounted at {disk}), then try again.\n"
    )
    for n, command in enumerate(commands, start=1):
        err = (out / f"{n}.err").read_text()
        assert (command, (out / f"{n}.rc").read_text().strip(), err) == (command, "1", said)


def test_the_bots_log_says_a_full_disk_in_one_line(tmp_path: Path) -> None:
    """The bot logs what fails in a reply or a task with log.exception; a full disk becomes one line."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    handler.addFilter(DiskFullLog(tmp_path / "data", database_url=False))
    log = logging.getLogger("tests.disk_full")
    log.addHandler(handler)
    try:
        with open("/dev/full", "w") as full:  # every write to it fails with ENOSPC
            full.write("x")
            full.flush()
    except OSError:
        log.exception("Storing message %s failed", 42)
    finally:
        log.removeHandler(handler)
    try:
        raise ValueError("not a disk")
    except ValueError:
        log.addHandler(handler)
        log.exception("Something else")
        log.removeHandler(handler)
    full_disk, other = records
    assert full_disk.exc_info is None and full_disk.levelname == "ERROR"
    line = handler.format(full_disk)
    assert "\n" not in line and line.endswith(", then try again.")
    assert line.startswith(
        "Storing message 42 failed: The disk is full (No space left on device): free space on the disk "
        f"holding {tmp_path / 'data'}"
    )
    assert other.exc_info is not None  # any other error keeps its traceback
