"""`personae llm-config`: named LLM endpoints that owners can pick (admin only; keys stay in env vars)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from bot.cli.output import print_table

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Core


def add_commands(commands: Subcommands) -> None:
    llm = commands.add_parser("llm-config", help="named LLM endpoints (admin only; keys stay in env vars)")
    lcommands = llm.add_subparsers(dest="llm_config_command", required=True)
    ladd = lcommands.add_parser("add", help="add a named LLM config that owners can pick")
    ladd.add_argument("name", help="the name owners type, e.g. cheap-summarizer")
    ladd.add_argument("model", help="litellm model string, e.g. openai/gpt-4o-mini")
    ladd.add_argument("--api-base", help="endpoint URL, e.g. http://127.0.0.1:8000/v1")
    ladd.add_argument("--api-key-env", help="NAME of the environment variable holding the API key")
    ladd.add_argument("--temperature", type=float, default=0.7)
    ladd.add_argument("--max-tokens", type=int, default=512)
    ladd.add_argument("--timeout", type=float, default=60.0, help="seconds per call")
    ladd.add_argument("--context-window", type=int, help="input tokens the model accepts")
    ladd.set_defaults(handler=cmd_llm_config_add)
    lcommands.add_parser("list", help="list LLM configs").set_defaults(handler=cmd_llm_config_list)
    lremove = lcommands.add_parser("remove", help="remove an LLM config (users fall back to the default)")
    lremove.add_argument("name")
    lremove.set_defaults(handler=cmd_llm_config_remove)


async def cmd_llm_config_add(args: argparse.Namespace, core: Core) -> None:
    config = await core.llm_configs.add(
        args.name,
        model=args.model,
        api_base=args.api_base,
        api_key_env=args.api_key_env,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        context_window=args.context_window,
    )
    print(f"Added LLM config {config.name!r} ({config.model}).")


async def cmd_llm_config_list(args: argparse.Namespace, core: Core) -> None:
    print_table(
        [("NAME", 24), ("MODEL", 32), ("API BASE", 32), ("KEY ENV", 0)],
        [(c.name, c.model, c.api_base or "-", c.api_key_env or "-") for c in await core.llm_configs.list()],
        empty="No LLM configs yet. Add one: personae llm-config add NAME MODEL [--api-base URL]",
    )


async def cmd_llm_config_remove(args: argparse.Namespace, core: Core) -> None:
    await core.llm_configs.remove(args.name)
    print(f"Removed LLM config {args.name!r}.")
