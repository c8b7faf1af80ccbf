"""The local embedding model: the packaged all-MiniLM-L6-v2 on the CPU, offline, in one of two runtimes.

- **ONNX Runtime, float32** (the default): the model exported once from the packaged weights to ONNX, mean
  pooling and normalisation inside the graph, and run with all of ONNX Runtime's graph optimisations. Its vectors
  are PyTorch float32's to a cosine of 0.99999 (bench/embeddings.py, tests/memories/test_embedding_local.py), so they
  are stored under the same model key. It needs no special CPU instructions to be fast: on 2 AVX2 cores it embeds
  about 1.5x the texts a second of PyTorch float32, and one question in about a millisecond.
- **PyTorch through sentence-transformers**: in bfloat16 on a CPU with AVX-512 BF16 or AMX (faster there than
  float32 anywhere), and in float32 where onnxruntime is missing or the model is not one the export handles.

The export needs PyTorch and transformers once; it is written under LOREKEEPER_VAR_DIR/models, named by the
model's files and the runtimes' versions, and written to a temporary file then renamed, so processes that export
at the same time each leave a whole file. Nothing is ever fetched from a hub.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np
from django.conf import settings

from apps.memories.embedding_export import exportable, model_path, onnx_export, onnx_file

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "float32", "bfloat16")
RUNTIMES = ("onnx", "torch-float32", "torch-bfloat16")
MAX_TOKENS = 256  # the model's max_seq_length (its sentence_bert_config.json): longer texts are cut, as before
BATCH = 32
PADDING = 1.05  # at most this many tokens computed for each real one in an ONNX Runtime batch (_batches)
RUN_TOKENS = 16  # what one more ONNX Runtime call costs beyond its tokens, in tokens' time (_batches)


class LocalModelUnavailable(Exception):
    """The local model cannot be loaded (a package missing, files unreadable)."""


_models: dict[tuple[str, str], object] = {}  # (name, runtime) → loaded model
_load_lock = threading.Lock()
# One encode at a time per process: with one thread per process two encodes at once only take turns, and a fast
# tokenizer is one object that threads must not share in several transformers releases ("RuntimeError: Already
# borrowed", huggingface/tokenizers#537).
encode_lock = threading.Lock()


def local_bfloat16() -> bool:
    """Whether the local model computes in bfloat16 (LOREKEEPER_EMBEDDINGS_PRECISION): PyTorch's matrix products
    in bfloat16 (weights held so, inputs cast by autocast), its normalisations, softmax and pooling in float32. On a
    CPU with AVX-512 BF16 or AMX that is 3x the texts a second of PyTorch float32, and the vectors are the same to a
    cosine of 0.9999 (bench/embeddings.py prints both). A CPU without those instructions emulates bfloat16, slower
    than float32: "auto" then keeps float32."""
    precision = settings.LOREKEEPER_EMBEDDINGS_PRECISION
    if precision not in PRECISIONS:
        raise LocalModelUnavailable(f"LOREKEEPER_EMBEDDINGS_PRECISION must be one of {', '.join(PRECISIONS)}.")
    if precision != "auto":
        return precision == "bfloat16"
    try:
        import torch
    except ImportError:
        return False
    native = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # torch.cpu's own probes of the CPU
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in native)


def local_runtime(name: str) -> str:
    """The runtime the model runs in, as configured: bfloat16 in PyTorch, else ONNX Runtime where it can."""
    if local_bfloat16():
        return "torch-bfloat16"
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return "torch-float32"
    return "onnx" if exportable(model_path(name)) else "torch-float32"


def local_model(name: str, runtime: str | None = None):
    """The loaded model (loading it at first) in the runtime asked, else the one configured. Either kind has
    `encode(texts) -> array` and `word_pieces(word) -> int`."""
    runtime = runtime or local_runtime(name)
    with _load_lock:
        if (name, runtime) not in _models:
            try:
                _models[(name, runtime)] = _OnnxModel(name) if runtime == "onnx" else _TorchModel(name, runtime)
            except LocalModelUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 — any load failure means no local vectors
                raise LocalModelUnavailable(f"Cannot load local model {name!r}: {exc}") from exc
        return _models[(name, runtime)]


def local_encode(name: str, texts: list[str], runtime: str | None = None) -> np.ndarray:
    """Unit vectors of the texts, one row each, in the texts' order."""
    model = local_model(name, runtime)
    with encode_lock:
        return model.encode(texts)


# --- PyTorch --------------------------------------------------------------------------------------------------------


class _TorchModel:
    def __init__(self, name: str, runtime: str) -> None:
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise LocalModelUnavailable("sentence-transformers is not installed.") from exc
        # PyTorch gives each process a thread per core, and its idle threads spin. A deployment runs several web and
        # worker processes, each embedding a few texts at a time: with one thread each they share the cores instead
        # of fighting over them (ten people writing at once on 2 cores, bench/load.py: context builds went from p50
        # 670 ms to 90 ms).
        torch.set_num_threads(settings.LOREKEEPER_EMBEDDINGS_THREADS)
        self.bfloat16 = runtime == "torch-bfloat16"
        self.model = SentenceTransformer(model_path(name), device="cpu")
        if self.bfloat16:
            # The weights of the matrix products in bfloat16 once, as autocast would cast them on every call (all
            # 22 M of them, for a one-sentence query too): the same vectors, a question in 4.5 ms, not 6.3.
            for module in self.model.modules():
                if isinstance(module, torch.nn.Linear):
                    module.to(torch.bfloat16)

    def encode(self, texts: list[str]) -> np.ndarray:
        import torch

        # encode() sorts by length within the call, so one large call pads less than many small ones.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bfloat16):
            return self.model.encode(texts, batch_size=BATCH, convert_to_numpy=True, show_progress_bar=False)

    def word_pieces(self, word: str) -> int:
        return len(self.model.tokenizer.tokenize(word))


# --- ONNX Runtime ---------------------------------------------------------------------------------------------------


def _batches(lengths: list[int]) -> list[list[int]]:
    """The texts' indexes in batches, longest first, each to be padded to its first: a batch ends at BATCH texts or
    where one more would pad it past PADDING of its tokens and RUN_TOKENS more. LoCoMo's turns in calls of 256
    (tokenised once, a twentieth of a millisecond a text): fixed batches of 32 padded 17% and embedded 87 texts a
    second of one core's time; these pad under 5% and embed 104.
    RUN_TOKENS: a call of ONNX Runtime costs about as much as 16 tokens beyond its tokens (the model's hundreds of
    nodes each started once), which matters for a search's few short sentences: one sentence of 8 tokens took
    5.2 ms, of 16 tokens 5.9 ms, of 32 tokens 9.2 ms on one core. LoCoMo's turns as a search's queries (three
    sentences each on average), 300 alternating with the rule before: p50 14.5 -> 13.9 and 18.4 -> 15.4 ms; the
    turns in calls of 256 as fast as before (127 and 115 texts a second against 130 and 113)."""
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])
    batches: list[list[int]] = []
    tokens = 0
    for index in order:
        batch = batches[-1] if batches else []
        if (
            not batch
            or len(batch) == BATCH
            or lengths[batch[0]] * (len(batch) + 1) > PADDING * (tokens + lengths[index]) + RUN_TOKENS
        ):
            batch = []
            batches.append(batch)
            tokens = 0
        batch.append(index)
        tokens += lengths[index]
    return batches


class _OnnxModel:
    def __init__(self, name: str) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        path = Path(model_path(name))
        target = onnx_file(name)
        if not target.exists():
            log.info("exporting the local model %s to ONNX at %s (once)", name, target)
            onnx_export(name, target)
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # One thread by default, as PyTorch's (LOREKEEPER_EMBEDDINGS_THREADS): it then starts no thread pool, so a
        # Celery worker can load it before forking. Idle threads of a larger pool do not spin, so that several
        # processes share the cores.
        options.intra_op_num_threads = settings.LOREKEEPER_EMBEDDINGS_THREADS
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(target), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()

    def encode(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch([text.strip() for text in texts])
        vectors: np.ndarray | None = None
        for batch in _batches([len(encoding.ids) for encoding in encodings]):
            width = len(encodings[batch[0]].ids)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, index in enumerate(batch):
                tokens = encodings[index].ids
                ids[row, : len(tokens)] = tokens
                mask[row, : len(tokens)] = 1
            output = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            if vectors is None:
                vectors = np.empty((len(texts), output.shape[1]), dtype=np.float32)
            vectors[batch] = output
        return vectors if vectors is not None else np.empty((0, 0), dtype=np.float32)

    def word_pieces(self, word: str) -> int:
        return len(self.tokenizer.encode(word, add_special_tokens=False).ids)
