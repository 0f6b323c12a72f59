"""How commands are declared and talk to the user: command groups and options passed on as keyword
arguments, failures as one line, progress bars on stderr, listings as aligned tables, the storage table;
and the one filter every byte of text the CLI prints goes through (`printable`)."""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias, cast, overload

if TYPE_CHECKING:
    from memory.service import MemoryStats

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

# Every C0 control but tab and newline, DEL and every C1 control, written as a JSON-style escape: text
# from cards, models, memories and transcripts can then never drive the terminal (OSC 52 writing the
# clipboard, OSC 0 the window title, CSI 2J clearing the screen), and JSON printed stays valid JSON.
_CONTROLS = {c: f"\\u{c:04x}" for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\t\n"}


def printable(text: str) -> str:
    """`text` with the characters that could drive a terminal shown escaped (`\\u001b`)."""
    return text.translate(_CONTROLS)


class PrintableStream(io.TextIOBase):
    """A text stream that writes what it is given `printable` to the stream it wraps; `unescaped` is
    that stream, for the CLI's own control sequences (the chat's redrawing, progress bars)."""

    def __init__(self, unescaped: TextIO) -> None:
        super().__init__()
        self.unescaped = unescaped

    def write(self, text: str) -> int:
        self.unescaped.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self.unescaped.flush()

    def fileno(self) -> int:  # `input()` uses line editing when this is the terminal's
        return self.unescaped.fileno()

    def isatty(self) -> bool:
        return self.unescaped.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.unescaped.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self.unescaped.errors


@contextmanager
def printable_output() -> Iterator[None]:
    """Standard output and error through `printable` while the command runs."""
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, PrintableStream(stdout))
    sys.stderr = cast(TextIO, PrintableStream(stderr))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def unescaped(stream: TextIO) -> TextIO:
    """The stream under `printable_output`'s filter: for the CLI's own control sequences only."""
    return cast(TextIO, getattr(stream, "unescaped", stream))


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


class ArgumentError(CommandError):
    """An argument that cannot be used, said in one line with the fix; exit code 2, as argparse's own."""


def undecodable_argument(argv: Sequence[str]) -> str | None:
    """One line for the first argument that is not UTF-8 text (Python keeps its bytes as surrogates,
    which nothing can store or print), naming the option it was given to; None when all are text."""
    for at, argument in enumerate(argv):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            shown = argument.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            before = argv[at - 1] if at else ""
            which = (
                f"The value of {before} ({shown!r})" if before.startswith("-") else f"The argument {shown!r}"
            )
            return (
                f"{which} is not valid UTF-8 text; pass it as UTF-8 "
                "(check the encoding of the terminal or the script that runs personae)."
            )
    return None


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
    from bot.cli.routed_output import runs_for_another_process

    if yes:
        return True
    if runs_for_another_process():  # this process's terminal is not the asker's (bot.cli.index_holder)
        raise CommandError(f"{question} Pass --yes to confirm (the process holding the index cannot ask).")
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

        # The bar redraws itself with control characters of its own, past the filter.
        bar = tqdm(total=total, desc=description, unit="exchange", file=unescaped(sys.stderr), leave=False)
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


# What the columns of `memory stats` count, printed under them.
STATS_LEGEND = """\
characters: SAID the exchanges as said; TEXT what recall searches (summary and carried facts);
  ORIGINALS the exchange kept beside it (hybrid; pinned or corrected memories); KEPT both;
  VS SAID: KEPT against SAID (minus: saved, plus: a cost)
CARRYING: memories whose summary dropped a name, number or date, carried in their text's last lines"""


def print_stats(stats: MemoryStats) -> None:
    """Memories by mode and summarizer with the characters they keep, then the work still pending."""
    print(
        f"{'MODE':<11} {'SUMMARIZER':<24} {'MEMORIES':>8} {'SAID':>10} {'TEXT':>10} {'ORIGINALS':>10} "
        f"{'KEPT':>10} {'VS SAID':>8} {'CARRYING':>8}"
    )
    for row in stats.rows:
        print(
            f"{row.mode:<11} {row.summarizer[:24]:<24} {row.memories:>8} {row.source_chars:>10,} "
            f"{row.stored_chars:>10,} {row.verbatim_chars:>10,} {row.kept_chars:>10,} "
            f"{row.kept_change_percent:>+7.0f}% {row.fidelity_misses:>8}"
        )
    print(
        f"{'total':<36} {stats.memories:>8} {stats.source_chars:>10,} {stats.stored_chars:>10,} "
        f"{stats.verbatim_chars:>10,} {stats.kept_chars:>10,} {stats.kept_change_percent:>+7.0f}%"
    )
    if stats.rows:
        print(STATS_LEGEND)
    for row in stats.rows:
        if row.mode == "hybrid" and row.kept_chars > row.source_chars:
            print(
                f"hybrid ({row.summarizer}) costs {row.kept_change_percent:.0f}% more than storing word for "
                "word: it keeps the summary and the original"
            )
    for line in stats.one_exchange_lines():
        print(line)
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
