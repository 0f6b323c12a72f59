"""Loading what a first reply would load, before it: litellm's import and the modules its first call
loads, and the word tables recall reads; done where the caller chooses (bot.cli.warm_up: a thread of
its own at start)."""

from __future__ import annotations

import importlib

from memory.llm import load_litellm

WARM_UP_MODEL = "openai/warm-up"  # any model string: the call is mocked, nothing is sent


def warm_up_llm(model: str | None) -> None:
    """Import litellm and run one mocked streamed call of `model` (no network), which loads what the
    first real call would; then the OpenAI SDK's resources, which that call loads only for real."""
    litellm = load_litellm()
    messages = [{"role": "user", "content": "warm up"}]
    model = model or WARM_UP_MODEL
    mocked = litellm.completion(model=model, messages=messages, mock_response="ok", stream=True)
    for _ in mocked:
        pass
    import openai

    openai.AsyncOpenAI(api_key="warm-up", base_url="http://127.0.0.1:9/v1").chat.completions  # noqa: B018
    # What only an async request over the network loads: its service logger, anyio's asyncio backend.
    importlib.import_module("litellm._service_logger")
    importlib.import_module("anyio._backends._asyncio")


def warm_up_recall() -> None:
    """Import wordfreq and read its English table, which recall ranks a question's words by
    (memory.recall.question): ~0.6-1.3 s of the first reply after a start, on the event loop."""
    from wordfreq import zipf_frequency

    zipf_frequency("warm", "en")
