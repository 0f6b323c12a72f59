"""Output of a command run for another process (bot.cli.index_holder): while it runs, what it prints
goes to buffers sent back to that process, and the rest of this process (a terminal chat writing a
reply, the bot's log lines) goes on writing where it did. The choice is a context variable, so a
command's tasks and threads write where the command does, and nothing else is redirected."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TextIO, cast


@dataclass(frozen=True, slots=True)
class CapturedOutput:
    """What one command run for another process printed, and whether that process's output is a terminal."""

    tty: bool
    stdout: io.StringIO = field(default_factory=io.StringIO)
    stderr: io.StringIO = field(default_factory=io.StringIO)


_captured: ContextVar[CapturedOutput | None] = ContextVar("captured_output", default=None)


def runs_for_another_process() -> bool:
    """Whether the command running now was asked for by another process: this terminal is not its user's."""
    return _captured.get() is not None


class RoutedStream(io.TextIOBase):
    """sys.stdout or sys.stderr: the captured buffer within a command run for another process, the
    stream it replaced everywhere else."""

    def __init__(self, default: TextIO, name: str) -> None:
        super().__init__()
        self._default = default
        self._name = name  # "stdout" or "stderr"

    def _captured_stream(self) -> io.StringIO | None:
        captured = _captured.get()
        return None if captured is None else cast(io.StringIO, getattr(captured, self._name))

    def write(self, text: str) -> int:
        stream = self._captured_stream()
        return (stream if stream is not None else self._default).write(text)

    def flush(self) -> None:
        if self._captured_stream() is None:
            self._default.flush()

    def fileno(self) -> int:
        if self._captured_stream() is not None:
            raise io.UnsupportedOperation("output sent to another process has no file descriptor")
        return self._default.fileno()

    def isatty(self) -> bool:
        captured = _captured.get()
        return captured.tty if captured is not None else self._default.isatty()

    @property
    def unescaped(self) -> TextIO:
        """The stream past `printable`'s filter (bot.cli.output.unescaped): the buffer when captured;
        the other process filters what it prints of it."""
        if (stream := self._captured_stream()) is not None:
            return cast(TextIO, stream)
        return cast(TextIO, getattr(self._default, "unescaped", self._default))

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8" if self._captured_stream() is not None else self._default.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return None if self._captured_stream() is not None else self._default.errors


@contextmanager
def routed_output() -> Iterator[None]:
    """sys.stdout and sys.stderr routed while this lasts (`captured_output` chooses, per context)."""
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, RoutedStream(stdout, "stdout"))
    sys.stderr = cast(TextIO, RoutedStream(stderr, "stderr"))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr


@contextmanager
def captured_output(tty: bool) -> Iterator[CapturedOutput]:
    """What the current context (and the tasks and threads it starts) prints, kept apart."""
    captured = CapturedOutput(tty=tty)
    token = _captured.set(captured)
    try:
        yield captured
    finally:
        _captured.reset(token)
