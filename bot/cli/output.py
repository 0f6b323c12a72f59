"""How commands are declared and talk to the user: command groups and options passed on as keyword
arguments, failures as one line, progress bars on stderr, listings as aligned tables, the storage table."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from memory.service import MemoryStats

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def command_group(commands: Subcommands, name: str, help: str) -> Subcommands:
    """`personae NAME`, a command whose subcommands are added to what this returns; one is required."""
    group = commands.add_parser(name, help=help)
    return group.add_subparsers(dest=f"{name.replace('-', '_')}_command", required=True)


def add_options(parser: argparse.ArgumentParser, options: Mapping[str, Mapping[str, Any]]) -> None:
    """A `--name` option for each keyword name in `options` (`_` written `-`), with its argparse settings."""
    for name, settings in options.items():
        parser.add_argument("--" + name.replace("_", "-"), **settings)


def option_values(args: argparse.Namespace, options: Mapping[str, object]) -> dict[str, Any]:
    """The parsed values of `options`, by keyword name: for a call that takes them as they are."""
    return {name: getattr(args, name) for name in options}


class CommandError(Exception):
    """A failure already phrased for the user; printed as one line, exit code 1."""


def progress(description: str) -> Callable[[int], Callable[[int], None]]:
    """A factory for tqdm bars on stderr: called with the total, returns the step function."""

    def start(total: int) -> Callable[[int], None]:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=description, unit="exchange", file=sys.stderr, leave=False)
        return bar.update

    return start


def print_table(columns: Sequence[tuple[str, int]], rows: Sequence[Sequence[str]], *, empty: str) -> None:
    """`rows` under their columns' names, each cell padded to its column's width (0: the last column,
    unpadded); `empty` alone when there are no rows."""
    if not rows:
        print(empty)
        return
    widths = [width for _, width in columns]
    for cells in ([name for name, _ in columns], *rows):
        print(" ".join(f"{cell:<{width}}" for cell, width in zip(cells, widths, strict=True)))


def print_stats(stats: MemoryStats) -> None:
    """Memories by mode and summarizer with the characters they store, then the work still pending."""
    print(
        f"{'MODE':<11} {'SUMMARIZER':<24} {'MEMORIES':>8} {'VERBATIM CHARS':>14} {'STORED CHARS':>12} "
        f"{'SAVING':>7} {'MISSES':>6}"
    )
    for row in stats.rows:
        print(
            f"{row.mode:<11} {row.summarizer[:24]:<24} {row.memories:>8} {row.source_chars:>14,} "
            f"{row.stored_chars:>12,} {row.saving_percent:>6.1f}% {row.fidelity_misses:>6}"
        )
    print(
        f"{'total':<36} {stats.memories:>8} {stats.source_chars:>14,} {stats.stored_chars:>12,} "
        f"{stats.saving_percent:>6.1f}%"
    )
    print(
        f"pending: {stats.pending_messages} messages not yet remembered, "
        f"{stats.unindexed_memories} memories not yet indexed"
    )
