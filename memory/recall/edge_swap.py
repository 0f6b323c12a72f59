"""Putting a rebuilt Edge shard in the old one's place, so that a rebuild stopped at any point leaves a
whole shard to open: the old one until the new one is complete, the new one after.

The swap is two renames (Linux has no portable exchange of two folders): the old shard to
`shard.old`, the new one to `shard`. Opening the index finishes or undoes a swap cut between them.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

_CONFIG = "edge_config.json"  # present once Edge has created a shard


def _old(shard: Path) -> Path:
    return shard.with_name(shard.name + ".old")


def swap_shard_folders(rebuilt: Path, shard: Path) -> None:
    """Move the rebuilt shard folder to `shard`, the old one out of the way and then away."""
    old = _old(shard)
    shutil.rmtree(old, ignore_errors=True)
    if shard.exists():
        shard.rename(old)
    rebuilt.rename(shard)
    shutil.rmtree(old, ignore_errors=True)


def recover_interrupted_swap(shard: Path, rebuilding: Path) -> None:
    """Before the shard is opened: undo a swap cut between its renames (the old shard is whole), and
    drop what an interrupted rebuild left (the old shard kept serving; `personae reindex` starts over)."""
    old = _old(shard)
    if not (shard / _CONFIG).exists() and (old / _CONFIG).exists():
        log.warning("A rebuild of the vector index was cut short while swapping: the old index is kept")
        shutil.rmtree(shard, ignore_errors=True)
        old.rename(shard)
    shutil.rmtree(old, ignore_errors=True)
    if rebuilding.exists():
        log.warning("A rebuild of the vector index was interrupted: the old index is kept")
        shutil.rmtree(rebuilding, ignore_errors=True)
