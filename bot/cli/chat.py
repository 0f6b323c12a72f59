"""`personae chat`: a terminal conversation through the same ChatService as Discord. Each turn is one
`ChatService.answer`, streamed to the screen; the work after it (memory formation, the rolling summary)
goes on while the next prompt waits. Notes appear above the prompt; logs go to a file, never the screen.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import sys
import termios
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from bot.cli.chat_arguments import check_chat_arguments
from bot.cli.output import CommandError
from bot.cli.terminal import (
    CHANNEL,
    PROMPT,
    REMEMBERED,
    LineReader,
    Screen,
    TerminalDelivery,
    ctrl_c_stops,
    over_discord_bound,
    terminal_settings,
)
from bot.cli.user_memories import print_receipt

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.cli.warm_up import ModelClientWarmUp
    from bot.runtime import Runtime
    from bot.settings import BotSettings
    from memory.chat.service import ChatRequest, ChatTurn
    from models import Personality

log = logging.getLogger(__name__)

T = TypeVar("T")


def add_commands(commands: Subcommands) -> None:
    chat = commands.add_parser(
        "chat",
        help="chat with a personality in the terminal",
        description="Chat with a personality in the terminal, stored and remembered as on Discord. "
        "Type /help in the chat for its commands.",
    )
    chat.add_argument("--personality", required=True, help="the personality's name")
    chat.add_argument("--user", default="terminal", help="your user id (default: terminal)")
    chat.add_argument("--name", default="You", help="the name the personality sees (default: You)")
    chat.add_argument(
        "--new",
        action="store_true",
        help="start a new conversation, with none of the earlier messages in its context (they stay in "
        "the log; long-term memories stay)",
    )
    chat.set_defaults(
        handler=cmd_chat,
        check_arguments=check_chat_arguments,
        with_memory=True,
        embeds=True,
        log_file=chat_log_file,
        warms_llm=True,
        serves_index=True,  # recall and the memory commands of other processes (bot.cli.index_holder)
    )


def chat_log_file(settings: BotSettings) -> Path:
    """Where the chat's logs go: the screen is the conversation's."""
    return settings.personae_data_dir / "logs" / "chat.log"


@dataclass(frozen=True, slots=True)
class ChatCommand:
    """A `/command` typed in the chat: what it does, and whether the chat ends after it."""

    run: Callable[[TerminalChat, str], Awaitable[None]]
    description: str
    ends_chat: bool = False


@dataclass
class TerminalChat:
    """One terminal conversation: its turns in flight, and the chat's own commands."""

    runtime: Runtime
    personality: Personality
    user_id: str
    user_name: str
    screen: Screen = field(default_factory=Screen)
    # Work in the background: turns whose reply is shown (their memories may still be forming), and
    # formation resumed in a conversation set aside. /quit waits for it; Ctrl-C leaves it for later.
    work: set[asyncio.Task[object]] = field(default_factory=set)
    # Conversations where a turn's formation ran beside another's, which may have left its exchange
    # to the pass after it: /quit runs that pass.
    overlapped: set[int] = field(default_factory=set)
    last_message_id: str | None = None  # the message the last reply answered, for /why
    last_reply: tuple[int, str] | None = None  # its conversation and message, for /retry and /edit
    last_reply_text: str = ""  # what it says, for /continue

    async def converse(self, lines: LineReader) -> None:
        """Read and answer lines until /quit or the end of input, then finish the work in flight."""
        while True:
            self.screen.prompting = True
            line = await lines.read(PROMPT)
            self.screen.prompting = False
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                name = text.split(maxsplit=1)[0].lower()
                command = COMMANDS.get(name)
                if command is None:
                    self.screen.write(f"(no command {name}: /help lists them)\n")
                    continue
                await command.run(self, text[len(name) :].strip())
                if command.ends_chat:
                    return
                continue
            await self.say(line)
        await self.finish()

    async def say(self, text: str) -> None:
        """One turn: the thinking mark at once, the reply as it comes; the work after it goes on."""
        from memory.chat.service import ChatRequest

        if (refused := over_discord_bound(text)) is not None:
            self.screen.write(f"{refused}\n")
            return
        request = ChatRequest(
            personality_id=self.personality.id,
            user_id=self.user_id,
            user_name=self.user_name,
            guild_id=None,
            channel_id=CHANNEL,
            message_id=f"terminal:{uuid.uuid4()}",
            text=text,
        )
        self.last_message_id = request.message_id
        await self._answer(request)

    async def _answer(self, request: ChatRequest) -> None:
        """The reply to `request` written as it comes; Ctrl-C meanwhile stops it where it is."""
        speaker = self.personality.display_name
        self.screen.thinking(speaker)
        delivery = TerminalDelivery(self.screen, speaker, request.continues)
        overlaps = bool(self.work)
        turn = self._in_background(self.runtime.chat.answer(request, delivery))
        if overlaps:
            turn.add_done_callback(self._overlapped)
        # The next prompt once the reply is stored (Ctrl-C then loses nothing), or the turn has ended.
        stored = asyncio.create_task(delivery.stored.wait())
        try:
            with ctrl_c_stops(lambda: self._stop(turn, delivery)):
                await asyncio.wait({turn, stored}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stored.cancel()
        if delivery.answered is not None:
            self.last_reply = (delivery.answered.conversation_id, request.message_id)
        if delivery.kept is not None:
            self.last_reply_text = delivery.kept
        if turn.cancelled():
            delivery.stopped_before_writing()
        elif turn.done():
            turn.result()  # a turn that ended before its reply was stored: its error is this command's

    def _stop(self, turn: asyncio.Task[ChatTurn], delivery: TerminalDelivery) -> None:
        """Ctrl-C while a reply is written: it ends where it is; before its first words, the turn ends."""
        if not delivery.stop():
            turn.cancel()

    def _in_background(self, work: Coroutine[object, object, T]) -> asyncio.Task[T]:
        task = asyncio.create_task(work)
        self.work.add(task)
        task.add_done_callback(self.work.discard)
        return task

    def _overlapped(self, turn: asyncio.Task[ChatTurn]) -> None:
        if not turn.cancelled() and turn.exception() is None:
            self.overlapped.add(turn.result().reply.prepared.conversation_id)

    async def finish(self) -> None:
        """Wait for the memories still forming (Ctrl-C leaves them: the messages are stored)."""
        if not self.work and not self.overlapped:
            return
        self.screen.note("(finishing this chat's memories; Ctrl-C leaves them for the next time)")
        await self._settle()
        for conversation_id in sorted(self.overlapped):
            after = await self.runtime.chat.after_reply(conversation_id)
            if after.remembered_message_ids:
                self.screen.note(REMEMBERED)
        self.overlapped.clear()

    async def _settle(self) -> None:
        """Wait for the turns in the background (their replies shown, their memories forming)."""
        while self.work:
            done, _ = await asyncio.wait(set(self.work))
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    log.error("A turn failed after its reply", exc_info=task.exception())

    async def greet(self) -> None:
        """The character's greeting, when this conversation is new."""
        greeting = await self.runtime.greetings.greet(
            personality_id=self.personality.id,
            guild_id=None,
            channel_id=CHANNEL,
            user_id=self.user_id,
            user_name=self.user_name,
        )
        if greeting is not None:
            self.screen.write(f"{self.personality.display_name}> {greeting.text}\n")

    async def start_new(self) -> None:
        """Set the current conversation aside (its memories still forming finish in the background)."""
        earlier = await self.runtime.chat.start_new_conversation(
            personality_id=self.personality.id, guild_id=None, channel_id=CHANNEL, user_id=self.user_id
        )
        if earlier is not None:  # its memories left forming by an earlier chat
            self._in_background(self.runtime.chat.after_reply(earlier))

    # ------------------------------------------------------------------------ the chat's commands

    async def quit(self, _: str) -> None:
        await self.finish()

    async def reset(self, _: str) -> None:
        # An exchange whose reply was shown forms first: the reset cancels what is held back, never a
        # memory the user just watched begin (which one it was would depend on timing).
        await self._settle()
        removed = await self.runtime.chat.reset_conversation(
            personality_id=self.personality.id, guild_id=None, channel_id=CHANNEL, user_id=self.user_id
        )
        self.screen.write(
            f"(conversation summary cleared: {removed} rows; what you said that is not yet a memory "
            "never will be; memories already formed stay)\n"
        )

    async def new(self, _: str) -> None:
        await self.start_new()
        self.screen.write("(a new conversation: earlier messages stay in the log, out of its context)\n")
        await self.greet()

    async def why(self, _: str) -> None:
        if self.last_message_id is None:
            self.screen.write("(no reply yet: /why shows the memories the last reply used)\n")
            return
        receipt = await self.runtime.memory.reply_receipt(
            user_id=self.user_id, message_id=self.last_message_id
        )
        await print_receipt(self.runtime, self.user_id, receipt, "The last reply")

    async def retry(self, _: str) -> None:
        """The 🔄: the last message answered again, the new reply in place of the old one."""
        if (request := await self._again()) is not None:
            await self._answer(request)

    async def continue_reply(self, _: str) -> None:
        """The last reply gone on from where it stopped, in its place."""
        if (request := await self._again()) is not None:
            await self._answer(dataclasses.replace(request, continues=self.last_reply_text))

    async def edit(self, text: str) -> None:
        """The last message said otherwise, and answered again in place of its reply."""
        from memory.chat.editing import edit_message
        from memory.errors import UserFacingError

        if not text:
            self.screen.write("(/edit TEXT: your last message becomes TEXT and is answered again)\n")
            return
        if (refused := over_discord_bound(text)) is not None:
            self.screen.write(f"{refused}\n")
            return
        if (request := await self._again()) is not None and self.last_reply is not None:
            cfg = self.runtime.models.chat(self.personality)
            conversation = self.last_reply[0]
            try:
                edited = await edit_message(self.runtime.sessionmaker, conversation, request, text, cfg=cfg)
            except UserFacingError as error:
                self.screen.write(f"({error})\n")
                return
            await self._answer(edited)

    async def _again(self) -> ChatRequest | None:
        """The last message as a request to answer again (Discord's 🔄 rules), or None, said why."""
        from memory.errors import UserFacingError

        if self.last_reply is None:
            self.screen.write("(no reply in this chat yet to answer again)\n")
            return None
        conversation_id, message_id = self.last_reply
        try:
            return await self.runtime.chat.request_again(
                conversation_id=conversation_id, message_id=message_id, user_id=self.user_id
            )
        except UserFacingError as error:
            self.screen.write(f"({error})\n")
            return None

    async def recall(self, query: str) -> None:
        """What this personality would recall for the user, as `personae recall` shows it."""
        from bot.cli.in_chat import run_in_chat

        if not query:
            self.screen.write("(/recall QUERY: what a reply would recall for it)\n")
            return
        await run_in_chat(
            self.runtime, self.user_id, ["recall", query, "--personality", self.personality.name]
        )

    async def memory(self, rest: str) -> None:
        """`personae memory ...` for the user, on the index this chat holds."""
        from bot.cli.in_chat import run_in_chat, split_words

        if (words := split_words(rest or "--help")) is not None:
            await run_in_chat(self.runtime, self.user_id, ["memory", *words])

    async def help(self, _: str) -> None:
        width = max(map(len, COMMANDS))
        for name, command in COMMANDS.items():
            self.screen.write(f"  {name.ljust(width)}  {command.description}\n")


# The chat's own commands, in the order /help lists them.
COMMANDS: dict[str, ChatCommand] = {
    "/help": ChatCommand(TerminalChat.help, "list these commands"),
    "/new": ChatCommand(TerminalChat.new, "start a new conversation (the earlier one stays in the log)"),
    "/retry": ChatCommand(TerminalChat.retry, "answer your last message again, in place of its reply"),
    "/continue": ChatCommand(TerminalChat.continue_reply, "the last reply goes on from where it stopped"),
    "/edit": ChatCommand(TerminalChat.edit, "/edit TEXT: your last message becomes TEXT, answered again"),
    "/why": ChatCommand(TerminalChat.why, "show the memories the last reply used, with their ids"),
    "/recall": ChatCommand(TerminalChat.recall, "/recall QUERY: what a reply would recall for it"),
    "/memory": ChatCommand(TerminalChat.memory, "/memory list|search|show|forget|...: your memories"),
    "/reset": ChatCommand(TerminalChat.reset, "clear the conversation's summary (memories stay)"),
    "/quit": ChatCommand(TerminalChat.quit, "finish forming memories and end (Ctrl-D too)", ends_chat=True),
    "/exit": ChatCommand(TerminalChat.quit, "the same as /quit", ends_chat=True),
}


async def cmd_chat(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.chat.service import NO_CHAT_MODEL

    personality = await runtime.personalities.get_detailed(args.personality)
    if runtime.models.chat(personality) is None:
        raise CommandError(NO_CHAT_MODEL)
    chat = TerminalChat(runtime, personality, user_id=args.user, user_name=args.name)
    if args.new:
        await chat.start_new()
    # The prompt comes when a reply needs no wait: the model client loaded since the start, and a
    # reply's preparation made once meanwhile and undone (ChatService.warm_up).
    model_client: ModelClientWarmUp | None = getattr(args, "model_client", None)
    await asyncio.gather(
        model_client.ready() if model_client is not None else asyncio.sleep(0),
        runtime.chat.warm_up(
            personality_id=personality.id,
            user_id=args.user,
            user_name=args.name,
            guild_id=None,
            channel_id=CHANNEL,
        ),
    )
    chat.screen.write(
        f"Chatting with {personality.display_name} as {args.name}. /help lists the chat's commands; "
        f"/quit or Ctrl-D ends. Logs: {chat_log_file(runtime.settings)}\n"
    )
    await chat.greet()
    lines = LineReader()
    terminal = terminal_settings()
    try:
        await chat.converse(lines)
    except asyncio.CancelledError:
        # Ctrl-C: the messages are stored; what was still forming is formed the next time.
        chat.screen.write("\n")
        for work in chat.work:
            work.cancel()
        raise
    finally:
        if terminal is not None:  # line editing, cut short by Ctrl-C, may have left echo off
            with contextlib.suppress(termios.error):
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, terminal)
