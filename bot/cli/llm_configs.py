"""`personae llm-config`: named LLM endpoints that owners can pick (admin only; keys stay in env vars)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from bot.cli.output import add_options, command_group, option_values, print_table

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Core


# `llm-config add`'s options, each passed on to LLMConfigService.add under its keyword name.
ADD_OPTIONS: dict[str, dict[str, Any]] = {
    "api_base": {"help": "endpoint URL, e.g. http://127.0.0.1:8000/v1"},
    "api_key_env": {"help": "NAME of the environment variable holding the API key"},
    "temperature": {"type": float, "default": 0.7, "help": "sampling temperature, 0 to 2 (default 0.7)"},
    "max_tokens": {"type": int, "default": 512, "help": "most tokens a reply may have (default 512)"},
    "timeout": {"type": float, "default": 60.0, "help": "seconds per call (default 60)"},
    "context_window": {"type": int, "help": "input tokens the model accepts"},
}


def add_commands(commands: Subcommands) -> None:
    lcommands = command_group(
        commands, "llm-config", "named LLM endpoints (admin only; keys stay in env vars)"
    )
    ladd = lcommands.add_parser("add", help="add a named LLM config that owners can pick")
    ladd.add_argument("name", help="the name owners type, e.g. cheap-summarizer")
    ladd.add_argument("model", help="litellm model string, e.g. openai/gpt-4o-mini")
    add_options(ladd, ADD_OPTIONS)
    ladd.set_defaults(handler=cmd_llm_config_add)
    lcommands.add_parser("list", help="list LLM configs").set_defaults(handler=cmd_llm_config_list)
    lremove = lcommands.add_parser("remove", help="remove an LLM config (users fall back to the default)")
    lremove.add_argument("name", help="the LLM config to remove")
    lremove.set_defaults(handler=cmd_llm_config_remove)


async def cmd_llm_config_add(args: argparse.Namespace, core: Core) -> None:
    config = await core.llm_configs.add(args.name, model=args.model, **option_values(args, ADD_OPTIONS))
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
