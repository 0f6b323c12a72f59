"""The terminal under `personae chat`: the screen a reply is written on (notes above the prompt), the
reply's delivery onto it, and lines read in a thread of their own so the chat goes on meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import signal
import sys
import termios
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext
from types import FrameType
from typing import TYPE_CHECKING, Any

from bot.cli.output import unescaped

if TYPE_CHECKING:
    from memory.chat.service import ChatReply, PreparedReply
    from memory.conversations import Venue

CHANNEL = "terminal"  # the channel id of a user's terminal chats, outside any guild
PROMPT = "you> "
THINKING = "thinking…"
REMEMBERED = "(remembered)"
STOPPED = "(stopped: the reply is kept as far as it went; /continue goes on, /retry answers again)"
STOPPED_EARLY = "(stopped before the reply began: your message is kept, unanswered)"
# Discord's own bound on a message, past which its client refuses to send: a message pasted here is
# held to it too, so no front door takes a 60,000-character message (a prompt cut from its start,
# seven summarizer calls for its memory, against at most two at this size).
MAX_MESSAGE_CHARS = 2000


def over_discord_bound(text: str) -> str | None:
    """The line that says a message is over Discord's bound and was not sent; None when it is not."""
    if (size := len(text.strip())) <= MAX_MESSAGE_CHARS:
        return None
    return (
        f"(not sent: your message is {size:,} characters, and a message is at most "
        f"{MAX_MESSAGE_CHARS:,}, as on Discord; shorten it or send it in parts)"
    )


def terminal_venue(user_id: str) -> Venue:
    """Where a user's terminal chats happen: a channel of their own, outside any guild."""
    from memory.conversations import Venue

    return Venue(guild_id=None, channel_id=CHANNEL, user_id=user_id)


class Screen:
    """The terminal the chat writes on: a reply line at a time, and notes put above the prompt while
    the user types. Marks and redrawing are for people: with output to a file or a pipe, only text."""

    def __init__(self) -> None:
        self.interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self.prompting = False  # the prompt is shown and the user may be typing
        self._replying = False  # a reply's line is being written: notes wait for its end
        self._held_notes: list[str] = []

    def write(self, text: str) -> None:
        """Text on the screen, its control characters shown escaped (bot.cli.output.printable)."""
        sys.stdout.write(text)
        sys.stdout.flush()

    def _redraw(self, controls: str, text: str = "") -> None:
        """The screen's own control sequence (past the escaping), then `text` as `write` shows it."""
        screen = unescaped(sys.stdout)
        screen.write(controls)
        screen.flush()
        self.write(text)

    def note(self, text: str) -> None:
        """A line of its own: after the reply being written, above the prompt if the user is at it
        (their typing kept)."""
        if self._replying:
            self._held_notes.append(text)
        elif self.interactive and self.prompting:
            self._redraw("\r\x1b[2K", f"{text}\n{PROMPT}{_typed_so_far()}")
        else:
            self.write(f"{text}\n")

    def thinking(self, speaker: str) -> None:
        """The speaker's line, with a mark until the reply's first words replace it."""
        self._replying = True
        self.write(f"{speaker}> " + (THINKING if self.interactive else ""))

    def stop_thinking(self, speaker: str) -> None:
        if self.interactive:
            self._redraw("\r\x1b[2K", f"{speaker}> ")

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
    thinking mark is already on the screen; `stored` is set once the reply is in the log. `stop` (Ctrl-C)
    ends the reply where it is: the model's next piece is neither shown nor kept."""

    def __init__(self, screen: Screen, speaker: str, start: str = "") -> None:
        self._screen = screen
        self._speaker = speaker
        self._start = start  # the reply's start, which the model goes on from (/continue)
        self._written: list[str] = []
        self._writing = False
        self.stopped = False
        self.kept: str | None = None  # the reply as stored
        self.answered: PreparedReply | None = None  # the message the reply answers, once delivered
        self.stored = asyncio.Event()

    def writing(self) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def stop(self) -> bool:
        """Stop the reply where it is; whether any of it is on the screen (else none will be)."""
        self.stopped = True
        return self._writing or self.answered is not None

    def stopped_before_writing(self) -> None:
        """The turn was cancelled before its first words: the speaker's line says so."""
        self._screen.stop_thinking(self._speaker)
        self._screen.end_reply(STOPPED_EARLY)

    def on_text(self, piece: str) -> bool | None:
        if self.stopped:
            return False
        if not self._writing:
            self._writing = True
            self._screen.stop_thinking(self._speaker)
            self._screen.write(self._start)
        self._written.append(piece)
        self._screen.write(piece)
        return None

    async def deliver(self, reply: ChatReply) -> Sequence[tuple[str, str]]:
        self.answered = reply.prepared
        if not self._writing:
            self._screen.stop_thinking(self._speaker)
        self._screen.end_reply(reply.text if not reply.ok else "")
        if self.stopped and reply.ok:
            self._screen.note(STOPPED)
        if not reply.ok:
            return []
        # Gone on from its start: the start and the words as written (their spacing kept).
        self.kept = (self._start + "".join(self._written)).rstrip() if self._start else reply.text
        return [(f"terminal:{uuid.uuid4()}", self.kept)]

    async def recorded(self) -> None:
        self.stored.set()

    async def remembered(self, message_ids: Sequence[str]) -> None:
        if message_ids:
            self._screen.note(REMEMBERED)


@contextmanager
def ctrl_c_stops(stop: Callable[[], None]) -> Iterator[None]:
    """Within: the first Ctrl-C calls `stop` (on the event loop); a second one does what Ctrl-C did
    before (asyncio's own: the chat ends)."""
    loop = asyncio.get_running_loop()
    before = signal.getsignal(signal.SIGINT)
    pressed = False

    def on_ctrl_c(signum: int, frame: FrameType | None) -> None:
        nonlocal pressed
        if not pressed:
            pressed = True
            loop.call_soon_threadsafe(stop)
        elif callable(before):
            before(signum, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


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
