"""How long a card's lorebook holds up one reply (issue 33): the card's parts for a reply (its book read
and scanned) and the prompt built with its active entries, both in worker threads with a deadline as
ChatService runs them (memory.chat.card_parts), for a card of 20,000 entries as `personae personality
import` keeps it (the first 1,000, memory.owners.lore_cap) and, for comparison, the same book stored
whole (a card imported before the cap).

    .venv/bin/python -m bench.lore_reply [--entries 20000] [--keys 30] [--replies 30]

Two books of each size: entries of `--keys` plain keys each (a reply names one of them), and constant
entries (all active: what the prompt's lore budget then has to fit). Prints p50/p95/max per reply.
No database or model is needed: these are the steps a reply runs on the card it read. Each reply gets
the card decoded afresh from its JSON, as it comes from PostgreSQL (the book is read and indexed once
per version: memory.owners.lore_index); the decoding, which reading the personality's row costs
whatever the lore, is timed apart ("decode").
"""

from __future__ import annotations

import asyncio
import json
import time
from statistics import median
from typing import Any

from bench._common import bench_parser, describe_ms
from memory.chat.card_parts import build_context_off_loop, card_parts_off_loop
from memory.chat.prompt import ContextBudget, HistoryMessage
from memory.owners.lore_cap import cap_lorebook


def card(entries: int, keys: int, *, constant: bool) -> dict[str, Any]:
    book = [
        {
            "keys": [f"word{n}x{k}" for k in range(keys)],
            "content": f"Entry {n} says something about place {n}.",
            "constant": constant,
            "insertion_order": n % 200,
        }
        for n in range(entries)
    ]
    return {"description": "A keeper of facts.", "character_book": {"entries": book}}


async def reply_time(stored: dict[str, Any], replies: int) -> tuple[list[float], list[float]]:
    """Each reply's lore work, and the decoding of its card."""
    budget = ContextBudget.for_window(128_000, share=0.8, memory_share=0.2, lore_share=0.2, reply_tokens=1000)
    written = json.dumps(stored)
    took, decoding = [], []
    for n in range(replies):
        started = time.perf_counter()
        card_read = json.loads(written)
        decoding.append(time.perf_counter() - started)
        history = [
            HistoryMessage(
                role="user", content=f"Tell me about word{n * 7}x3 and the weather.", author_name="U"
            ),
        ]
        started = time.perf_counter()
        parts = await card_parts_off_loop(
            card_read,
            display_name="Keeper",
            recent=[m.content for m in history],
            user="U",
            default_scan_depth=2,
        )
        await build_context_off_loop(
            system_prompt="You are Keeper.",
            user_name="U",
            memories=[],
            summary=None,
            history=history,
            budget=budget,
            model=None,
            card=parts,
        )
        took.append(time.perf_counter() - started)
    return took, decoding


async def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=30)
    parser.add_argument("--replies", type=int, default=30)
    args = parser.parse_args()
    for constant in (False, True):
        whole = card(args.entries, args.keys, constant=constant)
        imported, dropped = cap_lorebook(whole)
        kind = "constant entries" if constant else f"entries of {args.keys} keys"
        for label, stored in ((f"as imported ({dropped:,} left out)", imported), ("stored whole", whole)):
            took, decoding = await reply_time(stored, args.replies)
            decode = f"(decode p50 {median(decoding) * 1000:.0f} ms)"
            print(f"{args.entries:,} {kind}, {label:<28} {describe_ms(took)}  {decode}")


if __name__ == "__main__":
    asyncio.run(main())
