"""The terminal under `personae chat`: the screen a reply is written on (notes above the prompt), the
reply's delivery onto it, and lines read in a thread of their own so the chat goes on meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sys
import termios
import threading
import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory.chat.service import ChatReply

PROMPT = "you> "
THINKING = "thinking…"
REMEMBERED = "(remembered)"


class Screen:
    """The terminal the chat writes on: a reply line at a time, and notes put above the prompt while
    the user types. Marks and redrawing are for people: with output to a file or a pipe, only text."""

    def __init__(self) -> None:
        self.interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self.prompting = False  # the prompt is shown and the user may be typing
        self._replying = False  # a reply's line is being written: notes wait for its end
        self._held_notes: list[str] = []

    def write(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def note(self, text: str) -> None:
        """A line of its own: after the reply being written, above the prompt if the user is at it
        (their typing kept)."""
        if self._replying:
            self._held_notes.append(text)
        elif self.interactive and self.prompting:
            self.write(f"\r\x1b[2K{text}\n{PROMPT}{_typed_so_far()}")
        else:
            self.write(f"{text}\n")

    def thinking(self, speaker: str) -> None:
        """The speaker's line, with a mark until the reply's first words replace it."""
        self._replying = True
        self.write(f"{speaker}> " + (THINKING if self.interactive else ""))

    def stop_thinking(self, speaker: str) -> None:
        if self.interactive:
            self.write(f"\r\x1b[2K{speaker}> ")

    def end_reply(self, text: str) -> None:
        """The rest of the reply's line, then the notes that came while it was written."""
        self.write(f"{text}\n")
        self._replying = False
        for note in self._held_notes:
            self.write(f"{note}\n")
        self._held_notes.clear()


def _typed_so_far() -> str:
    """What the user has typed at the prompt (line editing keeps it), for redrawing it under a note."""
    try:
        import readline
    except ImportError:  # no line editing here: nothing to redraw
        return ""
    return readline.get_line_buffer()


class TerminalDelivery:
    """A reply printed as the model writes it, under the personality's name, and stored under an id of
    its own: a ReplyDelivery (memory.chat.turns, not imported here: `personae --help` stays light). The
    thinking mark is already on the screen; `stored` is set once the reply is in the log."""

    def __init__(self, screen: Screen, speaker: str) -> None:
        self._screen = screen
        self._speaker = speaker
        self._writing = False
        self.stored = asyncio.Event()

    def writing(self) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def on_text(self, piece: str) -> None:
        if not self._writing:
            self._writing = True
            self._screen.stop_thinking(self._speaker)
        self._screen.write(piece)

    async def deliver(self, reply: ChatReply) -> Sequence[tuple[str, str]]:
        if not self._writing:
            self._screen.stop_thinking(self._speaker)
        self._screen.end_reply(reply.text if not reply.ok else "")
        return [(f"terminal:{uuid.uuid4()}", reply.text)] if reply.ok else []

    async def recorded(self) -> None:
        self.stored.set()

    async def remembered(self, message_ids: Sequence[str]) -> None:
        if message_ids:
            self._screen.note(REMEMBERED)


class LineReader:
    """Lines from the terminal, read in a thread of its own so the chat goes on meanwhile. A daemon
    thread: Ctrl-C ends the chat at once rather than waiting on a line that will never come."""

    def __init__(self) -> None:
        self._asks: queue.SimpleQueue[tuple[str, asyncio.Future[str | None]]] = queue.SimpleQueue()
        self._loop = asyncio.get_running_loop()
        threading.Thread(target=self._serve, name="terminal-input", daemon=True).start()

    async def read(self, prompt: str) -> str | None:
        """The next line (`prompt` shown when interactive); None at the end of input."""
        answer: asyncio.Future[str | None] = self._loop.create_future()
        self._asks.put((prompt, answer))
        return await answer

    def _serve(self) -> None:
        while True:
            prompt, answer = self._asks.get()
            try:
                line = read_line(prompt)
            except (OSError, ValueError):  # the terminal went away
                line = None
            self._loop.call_soon_threadsafe(_settle, answer, line)


def _settle(answer: asyncio.Future[str | None], line: str | None) -> None:
    if not answer.done():
        answer.set_result(line)


def read_line(prompt: str) -> str | None:
    """One line from the terminal (the prompt only when interactive); None at end of input."""
    if sys.stdin.isatty():
        try:
            return input(prompt)
        except EOFError:
            return None
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


def terminal_settings() -> list[Any] | None:
    """The terminal's modes now, to put back at the end; None when input is not a terminal."""
    if not sys.stdin.isatty():
        return None
    with contextlib.suppress(termios.error):
        return termios.tcgetattr(sys.stdin.fileno())
    return None
