"""`personae chat`: a terminal conversation through the same ChatService as Discord, stored and
remembered alike."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING

from bot.cli.output import CommandError

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Runtime
    from memory.chat.service import ChatReply, ChatTurn

CHANNEL = "terminal"


def add_commands(commands: Subcommands) -> None:
    chat = commands.add_parser("chat", help="chat with a personality in the terminal")
    chat.add_argument("--personality", required=True, help="the personality's name")
    chat.add_argument("--user", default="terminal", help="your user id (default: terminal)")
    chat.add_argument("--name", default="You", help="the name the personality sees (default: You)")
    chat.add_argument(
        "--new", action="store_true", help="start a new conversation (clears its summary; memories stay)"
    )
    chat.set_defaults(handler=cmd_chat, with_memory=True)


class TerminalDelivery:
    """A reply printed as the model writes it, under the personality's name, and stored under an id of
    its own: a ReplyDelivery (memory.chat.turns)."""

    def __init__(self, display_name: str) -> None:
        self._display_name = display_name
        self.delivered = asyncio.Event()

    def writing(self) -> AbstractAsyncContextManager[None]:
        print(f"{self._display_name}> ", end="", flush=True)
        return nullcontext()

    def on_text(self, piece: str) -> None:
        print(piece, end="", flush=True)

    async def deliver(self, reply: ChatReply) -> Sequence[tuple[str, str]]:
        print(reply.text if not reply.ok else "")
        self.delivered.set()
        return [(f"terminal:{uuid.uuid4()}", reply.text)] if reply.ok else []

    async def remembered(self, message_ids: Sequence[str]) -> None:
        return None  # the terminal shows no 📝


async def cmd_chat(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.chat.service import NO_CHAT_MODEL, ChatRequest

    chat = runtime.chat
    personality = await runtime.personalities.get_detailed(args.personality)
    if runtime.models.chat(personality) is None:
        raise CommandError(NO_CHAT_MODEL)

    async def reset() -> int:
        return await chat.reset_conversation(
            personality_id=personality.id, guild_id=None, channel_id=CHANNEL, user_id=args.user
        )

    if args.new:
        await reset()
    print(f"Chatting with {personality.display_name}. /reset clears the summary; /quit or Ctrl-D ends.")
    # A turn's work after its reply (memory formation, rolling summary) runs while the user types; the
    # next turn starts once it is done, and a turn's failure ends the chat with its one line.
    turn: asyncio.Task[ChatTurn] | None = None
    try:
        while True:
            line = await asyncio.to_thread(read_line, "you> ")
            if line is None or line.strip() in ("/quit", "/exit"):
                break
            if not line.strip():
                continue
            if turn is not None:
                await turn
            if line.strip() == "/reset":
                removed = await reset()
                print(f"(conversation summary cleared: {removed} rows; long-term memories stay)")
                turn = None
                continue
            request = ChatRequest(
                personality_id=personality.id,
                user_id=args.user,
                user_name=args.name,
                guild_id=None,
                channel_id=CHANNEL,
                message_id=f"terminal:{uuid.uuid4()}",
                text=line,
            )
            delivery = TerminalDelivery(personality.display_name)
            turn = asyncio.create_task(chat.answer(request, delivery), name="terminal-turn")
            delivered = asyncio.create_task(delivery.delivered.wait())
            await asyncio.wait({turn, delivered}, return_when=asyncio.FIRST_COMPLETED)
            delivered.cancel()
            if turn.done():
                turn.result()  # a turn that ended before its reply was shown: its error is this command's
    finally:
        if turn is not None:
            await turn


def read_line(prompt: str) -> str | None:
    """One line from the terminal (the prompt only when interactive); None at end of input."""
    if sys.stdin.isatty():
        try:
            return input(prompt)
        except EOFError:
            return None
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None
