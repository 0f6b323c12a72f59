"""The terminal chat's controls, in a pseudo-terminal as a person uses them: Ctrl-C stops the reply
being written (kept as far as it went) and a second one leaves; /continue goes on from where it
stopped; /retry answers again in place (the 🔄's path); /edit changes the last message and answers it
again. Text that would drive the terminal
(OSC 52, OSC 0, CSI 2J) is shown escaped. One chat process does all of it (its start-up, litellm's
import most of it, costs more than the rest)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from models import Message
from testkit.llm_server import LLMTestServer, Trickle
from tests import test_chat_terminal
from tests.test_chat_terminal import HeldSummarizer, Terminal, rows

# That module's fixtures: the chat's environment, its summarizer, and Lilith in its database.
env = test_chat_terminal.env
summarizer = test_chat_terminal.summarizer
lilith = test_chat_terminal.lilith

FULL = "Biscuit is a fine name for a dog who likes long walks."
DRIVES_THE_TERMINAL = "Done \x1b]52;c;SGVsbG8=\x07 \x1b]0;pwned\x07 \x1b[2J \x9b2J ok"


@pytest.mark.usefixtures("lilith")
async def test_ctrl_c_stops_the_reply_then_continue_retry_edit_and_a_second_ctrl_c_leaves(
    env: dict[str, str], llm_server: LLMTestServer, summarizer: HeldSummarizer, tmp_path: Path
) -> None:
    summarizer.release.set()
    llm_server.responder = lambda body: FULL
    chat = Terminal("chat", "--personality", "lilith", "--user", "42", env=env, cwd=tmp_path)
    try:
        await chat.expect("you> ")
        llm_server.script(Trickle(interval=0.4))  # a word at a time: there is time to stop it
        chat.type("My dog is called Biscuit.")
        await chat.expect("Lilith> Biscuit")
        chat.process.send_signal(signal.SIGINT)
        await chat.expect("(stopped: the reply is kept as far as it went")
        await chat.expect("you> ")
        assert chat.process.poll() is None  # the chat goes on
        [_, kept] = await rows(env["DATABASE_URL"], Message)
        assert kept.role == "assistant" and kept.content.startswith("Biscuit")
        assert len(kept.content) < len(FULL) and kept.content in chat.output

        # The model goes on from the reply's start, which it is given, in its own spacing.
        llm_server.responder = lambda body: ", and more."
        chat.type("/continue")
        await chat.expect(f"Lilith> {kept.content}, and more.")
        await chat.expect("you> ")
        assert llm_server.requests[-1]["messages"][-1] == {"role": "assistant", "content": kept.content}
        [_, went_on] = await rows(env["DATABASE_URL"], Message)
        assert went_on.content == f"{kept.content}, and more."  # in place of the stopped one

        llm_server.responder = lambda body: FULL
        chat.type("/retry")
        await chat.expect(f"Lilith> {FULL}")
        await chat.expect("you> ")
        messages = await rows(env["DATABASE_URL"], Message)
        assert [(m.role, m.content) for m in messages] == [
            ("user", "My dog is called Biscuit."),
            ("assistant", FULL),
        ]  # the new answer in place of the stopped one

        llm_server.responder = lambda body: "A cat called Biscuit, then."
        chat.type("/edit My cat is called Biscuit.")
        await chat.expect("Lilith> A cat called Biscuit, then.")
        await chat.expect("you> ")
        assert llm_server.requests[-1]["messages"][-1]["content"].endswith("My cat is called Biscuit.")
        messages = await rows(env["DATABASE_URL"], Message)
        assert [(m.role, m.content) for m in messages] == [
            ("user", "My cat is called Biscuit."),
            ("assistant", "A cat called Biscuit, then."),
        ]

        # Text that would drive the terminal (OSC 52 sets the clipboard, OSC 0 the title, CSI 2J clears
        # the screen, 0x9B is CSI in one byte) is shown escaped: at the terminal, in this same chat.
        llm_server.responder = lambda body: DRIVES_THE_TERMINAL
        chat.type("hello")
        # The reply's line, then the prompt after it (a note of an earlier turn's memory may redraw the
        # prompt before the reply begins: the line is found first).
        turn = await chat.expect("Lilith> Done ")
        turn += await chat.expect("you> ")

        chat.process.send_signal(signal.SIGINT)  # at the prompt: leaves
        assert await chat.ended() == 130
    finally:
        chat.close()
    assert "Traceback" not in chat.output
    assert "Done \\u001b]52;c;SGVsbG8=\\u0007 \\u001b]0;pwned\\u0007 \\u001b[2J \\u009b2J ok" in turn
    assert "\x1b]" not in chat.output and "\x1b[2J" not in chat.output and "\x9b" not in chat.output
