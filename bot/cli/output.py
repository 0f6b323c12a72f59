"""How commands are declared and talk to the user: command groups and options passed on as keyword
arguments, failures as one line, progress bars on stderr, listings as aligned tables, the storage table."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, overload

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


def one_line(message: str) -> str:
    """An error as every `personae:` line reads: one sentence, capitalised, ending in a stop."""
    text = " ".join(message.split())
    if text[:1].islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


@overload
def check_id(value: str, option: str) -> str: ...


@overload
def check_id(value: None, option: str) -> None: ...


def check_id(value: str | None, option: str) -> str | None:
    """A user or guild id option, refused in one line when it could not be stored (the domain's rule)."""
    from memory.owners.personality_fields import check_id as check

    return check(value, option)


def read_text_file(path: Path, what: str) -> str:
    """A UTF-8 text file's content, or a CommandError saying why it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CommandError(f"No such file: {path}") from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path} is not UTF-8 text (byte {exc.start}); save the {what} as UTF-8") from None
    except OSError as exc:
        raise CommandError(f"Cannot read {path}: {exc.strerror}") from None


def confirm(question: str, *, yes: bool) -> bool:
    """True when `--yes` was given or the user answers y at the terminal; without a terminal to ask,
    a CommandError naming `--yes` (a script must say so)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise CommandError(f"{question} Pass --yes to confirm (there is no terminal to ask).")
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def progress(description: str) -> Callable[[int], Callable[[int], None]]:
    """A factory for tqdm bars on stderr: called with the total, returns the step function."""

    def start(total: int) -> Callable[[int], None]:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=description, unit="exchange", file=sys.stderr, leave=False)
        step: Callable[[int], None] = bar.update
        return step

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
        f"{'SAVING':>7} {'CARRYING':>8} {'VERBATIM KEPT':>13}"
    )
    for row in stats.rows:
        print(
            f"{row.mode:<11} {row.summarizer[:24]:<24} {row.memories:>8} {row.source_chars:>14,} "
            f"{row.stored_chars:>12,} {row.saving_percent:>6.1f}% {row.fidelity_misses:>8} "
            f"{row.verbatim_chars:>13,}"
        )
    print(
        f"{'total':<36} {stats.memories:>8} {stats.source_chars:>14,} {stats.stored_chars:>12,} "
        f"{stats.saving_percent:>6.1f}% {'':>8} {stats.verbatim_chars:>13,}"
    )
    if failed := stats.fallback_line():
        print(failed)
    print(
        f"pending: {stats.pending_messages} messages not yet remembered, "
        f"{stats.unindexed_memories} memories not yet indexed"
    )
    if stats.set_aside_memories:  # issue 33: rows that could not be indexed, never blocking the rest
        print(
            f"set aside: {stats.set_aside_memories} memories could not be indexed (see the log); "
            "`personae reindex` tries them again"
        )
