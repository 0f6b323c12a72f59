"""LLMClient against the OpenAI-compatible test server over real HTTP, so litellm's request path runs."""

from __future__ import annotations

import asyncio
import sys

import aiohttp
import pytest

from memory.llm import DEFAULT_CONTEXT_WINDOW, LLMClient, LLMConfigError, LLMUnavailableError, load_litellm
from memory.tokens import count_message_tokens, count_tokens
from memory.types import ModelConfig
from testkit.llm_server import Drop, Fail, LLMTestServer, NoChoices, Reply, Stall, Trickle

MESSAGES = [
    {"role": "system", "content": "You summarize."},
    {"role": "user", "content": "Alice moved to Lisbon in May. She loves the trams there."},
]


def config(server: LLMTestServer, *, timeout: float = 5.0) -> ModelConfig:
    return ModelConfig(model="openai/test-model", api_base=server.base_url, api_key="test", timeout=timeout)


def client(max_retries: int = 3, concurrency: int = 4) -> LLMClient:
    return LLMClient(max_concurrency_per_provider=concurrency, max_retries=max_retries, backoff_base=0.01)


def chat_requests(server: LLMTestServer) -> list[dict[str, object]]:
    return [r for r in server.requests if "messages" in r]


async def test_complete_roundtrip_sends_config(llm_server: LLMTestServer) -> None:
    cfg = ModelConfig(
        model="openai/test-model",
        api_base=llm_server.base_url,
        api_key="test",
        temperature=0.7,
        max_tokens=77,
        timeout=5.0,
    )
    reply = await client().complete(cfg, MESSAGES)
    assert reply == "Alice moved to Lisbon in May."
    (request,) = llm_server.requests
    assert request["model"] == "test-model"
    assert request["temperature"] == 0.7
    assert request["max_tokens"] == 77
    assert request["messages"] == MESSAGES
    assert not request.get("stream")


async def test_complete_max_tokens_overrides_config(llm_server: LLMTestServer) -> None:
    llm_server.script(Reply("short"))
    assert await client().complete(config(llm_server), MESSAGES, max_tokens=5) == "short"
    assert llm_server.requests[0]["max_tokens"] == 5


async def test_stream_yields_deltas(llm_server: LLMTestServer) -> None:
    llm_server.script(Reply("one two three four"))
    pieces = [piece async for piece in client().stream(config(llm_server), MESSAGES)]
    assert len(pieces) == 4
    assert "".join(pieces) == "one two three four"
    assert llm_server.requests[0]["stream"] is True


async def test_stream_retries_before_first_chunk(llm_server: LLMTestServer) -> None:
    llm_server.script(Fail(503), Drop(), Reply("after retries"))
    pieces = [piece async for piece in client().stream(config(llm_server), MESSAGES)]
    assert "".join(pieces) == "after retries"
    assert len(llm_server.requests) == 3


async def test_stream_releases_its_slot_when_abandoned(llm_server: LLMTestServer) -> None:
    llm = client(concurrency=1)
    cfg = config(llm_server)
    llm_server.script(Reply("many words in this reply"))
    stream = llm.stream(cfg, MESSAGES)
    assert await anext(stream) == "many "
    await stream.aclose()
    # With one slot, this would wait forever if the abandoned stream still held it.
    assert await asyncio.wait_for(llm.complete(cfg, MESSAGES), timeout=5) == "Alice moved to Lisbon in May."


async def test_rate_limit_then_success_is_retried(llm_server: LLMTestServer) -> None:
    llm_server.script(Fail(429))
    assert await client().complete(config(llm_server), MESSAGES) == "Alice moved to Lisbon in May."
    assert len(llm_server.requests) == 2


async def test_retry_after_is_honoured_and_capped(llm_server: LLMTestServer) -> None:
    llm = LLMClient(max_retries=3, backoff_base=0.01, backoff_max=0.5)
    delays: list[float] = []

    async def record(delay: float) -> None:
        delays.append(delay)

    llm.retry.sleep = record
    llm_server.script(Fail(429, retry_after=0.25), Fail(429, retry_after=120))
    await llm.complete(config(llm_server), MESSAGES)
    assert delays == [0.25, 0.5]


async def test_server_errors_past_retries_raise_unavailable(llm_server: LLMTestServer) -> None:
    llm_server.script(*[Fail(500)] * 4, Reply("never reached"))
    with pytest.raises(LLMUnavailableError) as info:
        await client(max_retries=3).complete(config(llm_server), MESSAGES)
    assert len(llm_server.requests) == 4
    assert info.value.model == "openai/test-model"
    assert "500" in str(info.value)
    assert "\n" not in str(info.value)


async def test_stall_beyond_timeout_is_retried_then_unavailable(llm_server: LLMTestServer) -> None:
    llm_server.script(Stall(2.0), Stall(2.0))
    with pytest.raises(LLMUnavailableError, match=r"timed out after 0\.3 s"):
        await client(max_retries=1).complete(config(llm_server, timeout=0.3), MESSAGES)
    assert len(llm_server.requests) == 2


async def test_stall_then_answer_within_retries(llm_server: LLMTestServer) -> None:
    llm_server.script(Stall(2.0))
    reply = await client(max_retries=1).complete(config(llm_server, timeout=0.3), MESSAGES)
    assert reply == "Alice moved to Lisbon in May."
    assert len(llm_server.requests) == 2


async def test_dropped_connection_is_retried(llm_server: LLMTestServer) -> None:
    llm_server.script(Drop(), Drop())
    assert await client().complete(config(llm_server), MESSAGES) == "Alice moved to Lisbon in May."
    assert len(llm_server.requests) == 3


async def test_dropped_connections_past_retries_name_the_drop(llm_server: LLMTestServer) -> None:
    llm_server.script(Drop(), Drop())
    with pytest.raises(LLMUnavailableError, match="connection"):
        await client(max_retries=1).complete(config(llm_server), MESSAGES)


async def test_bad_request_is_not_retried(llm_server: LLMTestServer) -> None:
    llm_server.script(Fail(400, body="context too long"))
    with pytest.raises(LLMUnavailableError, match="context too long"):
        await client().complete(config(llm_server), MESSAGES)
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("status", [401, 404])
async def test_auth_and_not_found_are_config_errors(llm_server: LLMTestServer, status: int) -> None:
    llm_server.script(Fail(status))
    with pytest.raises(LLMConfigError, match="openai/test-model"):
        await client().complete(config(llm_server), MESSAGES)
    assert len(llm_server.requests) == 1


async def test_unknown_model_on_server_is_config_error(llm_server: LLMTestServer) -> None:
    llm_server.known_models = {"test-model"}
    cfg = ModelConfig(model="openai/no-such-model", api_base=llm_server.base_url, api_key="test", timeout=5)
    with pytest.raises(LLMConfigError, match="not found"):
        await client().complete(cfg, MESSAGES)


async def test_concurrency_is_bounded_per_provider(llm_server: LLMTestServer) -> None:
    llm_server.latency = 0.1
    llm = client(concurrency=2)
    cfg = config(llm_server)
    replies = await asyncio.gather(*(llm.complete(cfg, MESSAGES) for _ in range(10)))
    assert len(replies) == 10
    assert len(chat_requests(llm_server)) == 10
    assert llm_server.max_in_flight == 2


async def test_unknown_provider_raises_config_error_before_any_request(llm_server: LLMTestServer) -> None:
    cfg = ModelConfig(model="nosuchprovider/x", api_base=llm_server.base_url, api_key="test")
    with pytest.raises(LLMConfigError, match="nosuchprovider/x"):
        await client().complete(cfg, MESSAGES)
    assert llm_server.requests == []


def test_validate_model() -> None:
    llm = LLMClient()
    llm.validate_model("openai/gpt-4o-mini")
    llm.validate_model("ollama/llama3.1")
    llm.validate_model("gpt-4o-mini")
    for bad in ("nosuchprovider/x", "", " openai/gpt-4o"):
        with pytest.raises(LLMConfigError) as info:
            llm.validate_model(bad)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "model", ["openai/test-model", "gpt-4o-mini", "ollama/llama3.1", "huggingface/meta-llama/Llama-3-8b"]
)
def test_token_counts_stay_offline_once_litellm_is_loaded(model: str) -> None:
    # Llama-3 names would make litellm fetch a tokenizer from the Hugging Face hub; load_litellm forbids it.
    load_litellm()
    text_tokens = count_tokens("Alice moved to Lisbon in May.", model)
    message_tokens = count_message_tokens(MESSAGES, model)
    assert 5 <= text_tokens <= 12
    assert message_tokens > text_tokens
    assert count_tokens("", model) == 0


def test_context_window() -> None:
    llm = LLMClient()
    assert llm.context_window(ModelConfig(model="openai/test-model", context_window=4096)) == 4096
    assert llm.context_window(ModelConfig(model="openai/gpt-4o-mini")) == 128_000
    assert llm.context_window(ModelConfig(model="openai/test-model")) == DEFAULT_CONTEXT_WINDOW


async def test_llm_module_does_not_import_litellm_at_import() -> None:
    code = (
        "import sys, memory.llm, memory.recall.embedders; "
        "print('litellm' in sys.modules, 'torch' in sys.modules)"
    )
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE)
    stdout, _ = await process.communicate()
    assert stdout.decode().split() == ["False", "False"]


CANCELLED_EMBEDDING = """
import asyncio, sys
from memory.recall.embedders import LiteLLMEmbedder

async def main():
    embedder = LiteLLMEmbedder("openai/test-embedding", api_base=sys.argv[1], api_key="test", dimension=4)
    task = asyncio.create_task(embedder.embed(["Alice moved to Lisbon."]))
    await asyncio.sleep(0)  # the call is in litellm's executor, building its request coroutine
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    print("cancelled" if task.cancelled() else "not cancelled")

asyncio.run(main())
"""


async def test_an_embedding_cancelled_in_flight_prints_no_warning(llm_server: LLMTestServer) -> None:
    # A stopped import or a pass cancelled at shutdown: litellm leaves its request coroutine unawaited,
    # which a process prints as a RuntimeWarning unless load_litellm's filter holds it back.
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CANCELLED_EMBEDDING,
        llm_server.base_url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await process.communicate()
    assert stdout.decode().split() == ["cancelled"]
    assert "never awaited" not in stderr.decode(), stderr.decode()


async def test_server_drop_really_closes_the_connection(llm_server: LLMTestServer) -> None:
    llm_server.script(Drop())
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await session.post(
                f"{llm_server.base_url}/chat/completions", json={"model": "test-model", "messages": MESSAGES}
            )
        async with session.get(f"{llm_server.base_url}/models") as response:
            assert response.status == 200


async def test_no_choices_is_unavailable_at_once(llm_server: LLMTestServer) -> None:
    llm_server.script(NoChoices(), Reply("never reached"))
    with pytest.raises(LLMUnavailableError, match="no choices"):
        await client().complete(config(llm_server), MESSAGES)
    assert len(llm_server.requests) == 1  # an empty answer is not asked again and again


async def test_missing_key_is_a_config_error_naming_the_setting_before_any_request(
    llm_server: LLMTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = ModelConfig(model="openai/gpt-4o-mini", key_setting="SUMMARIZER_API_KEY")
    with pytest.raises(LLMConfigError) as info:
        await client().complete(cfg, MESSAGES)
    assert info.value.reason == "missing API key (set SUMMARIZER_API_KEY)"
    assert llm_server.requests == []


async def test_an_api_base_without_a_key_sends_a_placeholder(llm_server: LLMTestServer) -> None:
    cfg = ModelConfig(model="openai/local-model", api_base=llm_server.base_url, timeout=5)
    assert await client().complete(cfg, MESSAGES) == "Alice moved to Lisbon in May."
    pieces = [piece async for piece in client().stream(cfg, MESSAGES)]
    assert "".join(pieces) == "Alice moved to Lisbon in May."
    assert llm_server.authorizations == ["Bearer no-key", "Bearer no-key"]


@pytest.mark.parametrize(
    ("status", "hint"), [(401, "check SUMMARIZER_API_KEY"), (404, "check SUMMARIZER_MODEL")]
)
async def test_config_errors_name_the_setting_to_fix(
    llm_server: LLMTestServer, status: int, hint: str
) -> None:
    llm_server.script(Fail(status))
    cfg = ModelConfig(
        model="openai/test-model",
        api_base=llm_server.base_url,
        api_key="bad",
        timeout=5,
        key_setting="SUMMARIZER_API_KEY",
        model_setting="SUMMARIZER_MODEL",
    )
    with pytest.raises(LLMConfigError) as info:
        await client().complete(cfg, MESSAGES)
    assert hint in info.value.reason and "\n" not in str(info.value)
    assert len(llm_server.requests) == 1


async def test_stream_of_empty_deltas_is_cut_when_idle(llm_server: LLMTestServer) -> None:
    llm_server.script(Trickle(idle=30), Trickle(idle=30))  # the opening idles, and so does its retry
    llm = client(max_retries=1)
    with pytest.raises(LLMUnavailableError, match="timed out"):
        async for _ in llm.stream(config(llm_server, timeout=0.5), MESSAGES):
            pass
    # Mid-stream: words, then nothing but empty deltas.
    llm_server.reset()
    llm_server.responder = lambda request: "one two three"
    llm_server.script(Trickle(interval=30))
    pieces: list[str] = []
    patient = LLMClient(stream_idle_seconds=0.5)
    with pytest.raises(LLMUnavailableError, match=r"no text for 0\.5 s"):
        async for piece in patient.stream(config(llm_server, timeout=30), MESSAGES):
            pieces.append(piece)
    assert pieces == ["one "]  # the partial answer came, then the cut


async def test_stream_that_never_ends_is_cut_at_its_total_deadline(llm_server: LLMTestServer) -> None:
    llm_server.responder = lambda request: " ".join(["word"] * 100)
    llm_server.script(Trickle(interval=0.2))  # alive, never idle for long, far too slow
    pieces: list[str] = []
    with pytest.raises(LLMUnavailableError, match=r"not done within 3 s"):  # twice the call's timeout
        async for piece in client().stream(config(llm_server, timeout=1.5), MESSAGES):
            pieces.append(piece)
    assert 0 < len(pieces) < 100
