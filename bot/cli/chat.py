"""`personae chat`: a terminal conversation through the same ChatService as Discord, stored and
remembered alike."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from typing import TYPE_CHECKING

from bot.cli.output import CommandError

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Runtime

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


async def cmd_chat(args: argparse.Namespace, runtime: Runtime) -> None:
    from bot.tasks import BackgroundTasks
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
    # After-reply work (memory formation, rolling summary) runs while the user types, one pass at a time.
    background = BackgroundTasks()
    try:
        while True:
            line = await asyncio.to_thread(read_line, "you> ")
            if line is None or line.strip() in ("/quit", "/exit"):
                break
            if not line.strip():
                continue
            if line.strip() == "/reset":
                removed = await reset()
                print(f"(conversation summary cleared: {removed} rows; long-term memories stay)")
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
            await background.drain()
            prepared = await chat.prepare(request)
            print(f"{personality.display_name}> ", end="", flush=True)
            reply = await chat.generate(prepared, on_text=lambda piece: print(piece, end="", flush=True))
            print(reply.text if not reply.ok else "")
            if reply.ok:
                await chat.record_reply(reply, [(f"terminal:{uuid.uuid4()}", reply.text)])
                background.spawn(chat.after_reply(prepared.conversation_id), name="terminal-after-reply")
    finally:
        await background.drain()


def read_line(prompt: str) -> str | None:
    """One line from the terminal (the prompt only when interactive); None at end of input."""
    if sys.stdin.isatty():
        try:
            return input(prompt)
        except EOFError:
            return None
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None
