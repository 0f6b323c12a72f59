"""`personae demo`: sample personalities, their imported chats, the storage they take, and recalls."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli.output import print_stats, progress

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Runtime

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
SAMPLE_PERSONALITIES = (
    ("Lilith", "verbatim", "You are Lilith, a sarcastic but warm librarian who loves old maps."),
    ("Sage", "summarized", "You are Sage, a calm gardener who remembers every friend's story."),
)
DEMO_RECALLS = (
    ("sage", "1001", "How old is my grandmother?"),
    ("sage", "1001", "Plot #17"),
    ("sage", "1002", "what is my bonsai called"),
    ("lilith", "1002", "when is Turnip's birthday"),
)
NO_SUMMARIZER_NOTE = (
    "\nNo SUMMARIZER_MODEL is set, so Sage's summaries are extractive: sentences picked, not"
    "\nrewritten; a name, number or date they dropped is carried in the memory's text (CARRYING)."
    "\nSet SUMMARIZER_MODEL (e.g. ollama/llama3.1 or openai/gpt-4o-mini), then"
    "\n`personae resummarize --personality sage`."
)


def add_commands(commands: Subcommands) -> None:
    demo = commands.add_parser("demo", help="sample personalities, imported chats, storage and recalls")
    demo.set_defaults(handler=cmd_demo, with_memory=True)


async def cmd_demo(args: argparse.Namespace, runtime: Runtime) -> None:
    from memory.transfer.transcript import read_transcript

    for name, mode, prompt in SAMPLE_PERSONALITIES:
        personality, created = await runtime.personalities.create(name, prompt=prompt, memory_mode=mode)
        print(f"{'Created' if created else 'Found'} personality {name} (memory {mode}).")
        lines, skipped = read_transcript(EXAMPLES_DIR / f"{personality.name}.jsonl")
        report = await runtime.transfer.import_transcript(
            lines,
            personality=personality,
            default_user_id=None,
            skipped_lines=skipped,
            progress=progress(f"Remembering {name}'s chats"),
        )
        print(
            f"  imported {report.messages_new} new of {report.messages_read} messages, "
            f"{report.formation.memories} new memories"
        )
    for name, _, _ in SAMPLE_PERSONALITIES:
        personality = await runtime.personalities.get(name)
        print(f"\nStorage for {name} ({personality.memory_mode}):")
        print_stats(await runtime.memory.stats(personality_id=personality.id))
    if runtime.models.deployment_summarizer is None:
        print(NO_SUMMARIZER_NOTE)
    print("\nRecalls:")
    for name, user, query in DEMO_RECALLS:
        personality = await runtime.personalities.get(name)
        memories = await runtime.memory.recall(
            personality_id=personality.id, user_id=user, query=query, limit=2
        )
        print(f"  {name} / user {user}: {query!r}")
        for m in memories:
            excerpt = " / ".join(m.content.splitlines())
            print(f"    [{m.occurred_at:%Y-%m-%d}] {excerpt[:150]}{'...' if len(excerpt) > 150 else ''}")
