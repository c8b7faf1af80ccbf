"""The local embedding model: the packaged all-MiniLM-L6-v2 on the CPU, offline, in one of two runtimes.

- **ONNX Runtime, float32** (the default): the model exported once from the packaged weights to ONNX, mean
  pooling and normalisation inside the graph, and run with all of ONNX Runtime's graph optimisations. Its vectors
  are PyTorch float32's to a cosine of 0.99999 (bench/embeddings.py, tests/memories/test_embedding_local.py), so they
  are stored under the same model key. It needs no special CPU instructions to be fast: on 2 AVX2 cores it embeds
  about 1.5x the texts a second of PyTorch float32, and one question in about a millisecond.
- **PyTorch through sentence-transformers**: in bfloat16 where asked, or under "auto" where the CPU multiplies
  bfloat16 natively and the first start on the machine measured it faster than float32 (measured_runtime: with AMX
  about 3x, with AVX-512 BF16 alone sometimes half), and in float32 where onnxruntime is missing or the model is not
  one the export handles.

The export needs PyTorch and transformers once; it is written under LOREKEEPER_VAR_DIR/models, named by the
model's files and the runtimes' versions, and written to a temporary file then renamed, so processes that export
at the same time each leave a whole file. Nothing is ever fetched from a hub.
"""

from __future__ import annotations

import json
import logging
import platform
import random
import threading
import time
from pathlib import Path

import numpy as np
from django.conf import settings
from filelock import FileLock

from apps.common.files import write_whole
from apps.memories.embedding_export import exportable, kept_file, model_path, onnx_export, onnx_file, stamp

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "float32", "bfloat16")
RUNTIMES = ("onnx", "torch-float32", "torch-bfloat16")
MAX_TOKENS = 256  # the model's max_seq_length (its sentence_bert_config.json): longer texts are cut, as before
BATCH = 32
PADDING = 1.05  # at most this many tokens computed for each real one in an ONNX Runtime batch (_batches)
RUN_TOKENS = 16  # what one more ONNX Runtime call costs beyond its tokens, in tokens' time (_batches)
BFLOAT16_GAIN = 1.1  # auto takes bfloat16 where it embeds at least this many times float32's texts a second …
BFLOAT16_QUESTION = 1.5  # … and answers one question in at most this many times float32's (better_runtime)
MEASURED_SO = 2  # the way auto measures (_measure): a new way measures again
LOCK_SECONDS = 120  # a process waits at most this long for another's measurement, then keeps float32


class LocalModelUnavailable(Exception):
    """The local model cannot be loaded (a package missing, files unreadable)."""


_models: dict[tuple[str, str], object] = {}  # (name, runtime) → loaded model
_load_lock = threading.Lock()
# One encode at a time per process: with one thread per process two encodes at once only take turns, and a fast
# tokenizer is one object that threads must not share in several transformers releases ("RuntimeError: Already
# borrowed", huggingface/tokenizers#537).
encode_lock = threading.Lock()


def _precision() -> str:
    precision = settings.LOREKEEPER_EMBEDDINGS_PRECISION
    if precision not in PRECISIONS:
        raise LocalModelUnavailable(f"LOREKEEPER_EMBEDDINGS_PRECISION must be one of {', '.join(PRECISIONS)}.")
    return precision


def native_bfloat16() -> bool:
    """Whether the CPU has instructions that multiply bfloat16 (AVX-512 BF16 or AMX), by PyTorch's own probes. A CPU
    without them emulates bfloat16, slower than float32; one with them is not always faster (measured_runtime)."""
    try:
        import torch
    except ImportError:
        return False
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)


def local_runtime(name: str) -> str:
    """The runtime the model runs in (LOREKEEPER_EMBEDDINGS_PRECISION). float32: ONNX Runtime where it can, else
    PyTorch. bfloat16: PyTorch's matrix products in bfloat16 (weights held so, inputs cast by autocast), its
    normalisations, softmax and pooling in float32; the vectors are float32's to a cosine of 0.9999. auto: float32,
    unless the CPU multiplies bfloat16 natively and this machine measured bfloat16 faster (measured_runtime)."""
    precision = _precision()
    if precision == "bfloat16":
        return "torch-bfloat16"
    try:
        import onnxruntime  # noqa: F401

        float32 = "onnx" if exportable(model_path(name)) else "torch-float32"
    except ImportError:
        float32 = "torch-float32"
    if precision == "float32" or not native_bfloat16():
        return float32
    return measured_runtime(name, float32)


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


# --- auto: bfloat16 where this machine measured it faster -----------------------------------------------------------

_WORDS = (
    "Mira lit the lantern at the ford while the ferryman counted silver coins and Caroline asked about the old "
    "library by the river where her grandmother once kept a ledger of every crossing and the harvest festival"
).split()
_SAMPLE = [" ".join(random.Random(seed).choices(_WORDS, k=8 + seed % 40)) + "." for seed in range(64)]
_QUESTION = "Who relit the lantern at the ford?"
HALF = "torch-bfloat16"
_chosen: dict[tuple[str, str], str] = {}  # (name, float32 runtime) → the runtime auto chose, once a process
_choice_lock = threading.Lock()


def _cpu() -> str:
    """What names this CPU for the remembered choice: its model and instruction sets (a VM moved to other hardware,
    or shown other instructions, measures again)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    wanted = [line for line in lines if line.split(":")[0].strip() in ("model name", "flags", "Features")]
    return "\n".join(dict.fromkeys(wanted))


def choice_file(name: str) -> Path:
    """Where auto's measured figures are kept: named by the CPU (its model, instruction sets and PyTorch's probes),
    the model's files, the packages that run it, the threads and the way it is measured."""
    digest = stamp(name, ("torch", "onnxruntime", "transformers", "sentence-transformers"))
    digest.update(f"{_cpu()}\nnative={native_bfloat16()}\nthreads={settings.LOREKEEPER_EMBEDDINGS_THREADS}\n".encode())
    digest.update(f"measured={MEASURED_SO}\n".encode())
    return kept_file(name, f"runtime-{digest.hexdigest()[:16]}.json")


def _measure(name: str, runtimes: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Each runtime's texts a second over the sample (chat turns of 8–47 words) and one question's milliseconds,
    the best of three tries each, the runtimes taking turns (so that what else the machine does meanwhile, such as
    other processes starting, falls on both). A runtime that cannot be loaded or fails is left out."""
    models = {}
    for runtime in runtimes:
        try:
            models[runtime] = local_model(name, runtime)
            with encode_lock:
                models[runtime].encode(_SAMPLE[:8])
        except Exception as exc:  # noqa: BLE001 — that runtime is not an option here
            log.warning("the local model in %s could not be measured: %s", runtime, exc)
            models.pop(runtime, None)
    batch = {runtime: float("inf") for runtime in models}
    question = dict(batch)
    for _ in range(3):
        for runtime, model in models.items():
            with encode_lock:
                batch[runtime] = min(batch[runtime], _timed(model.encode, _SAMPLE))
                question[runtime] = min(question[runtime], *(_timed(model.encode, [_QUESTION]) for _ in range(2)))
    return {
        runtime: {
            "texts_per_second": round(len(_SAMPLE) / batch[runtime], 1),
            "question_ms": round(question[runtime] * 1e3, 2),
        }
        for runtime in models
    }


def _timed(encode, texts: list[str]) -> float:
    started = time.perf_counter()
    encode(texts)
    return time.perf_counter() - started


def better_runtime(figures: dict[str, dict[str, float]], float32: str) -> str:
    """bfloat16 where it embeds at least BFLOAT16_GAIN the texts a second of float32 and answers a question no
    slower than BFLOAT16_QUESTION times float32's: float32's vectors otherwise, as those stored before. Where only
    one of the two could be measured, that one."""
    if HALF not in figures or float32 not in figures:
        return HALF if HALF in figures else float32
    half, full = figures[HALF], figures[float32]
    faster = half["texts_per_second"] >= BFLOAT16_GAIN * full["texts_per_second"]
    return HALF if faster and half["question_ms"] <= BFLOAT16_QUESTION * full["question_ms"] else float32


def measured_runtime(name: str, float32: str) -> str:
    """auto's runtime on a CPU that multiplies bfloat16 natively. Such a CPU is not always faster in bfloat16: with
    AMX it embeds about 3x the texts a second of PyTorch float32, with AVX-512 BF16 alone it may embed half of ONNX
    Runtime's float32 (bench/embeddings.py). So the first process on a machine measures both on a fixed sample,
    under a file lock (the others wait, then read), and keeps the figures in var/models; each process applies
    better_runtime to them. Where nothing is kept and nothing can be (var/models not writable, or the lock not had
    within LOCK_SECONDS), float32, unmeasured: processes starting together never each measure, nor choose apart."""
    key = (name, float32)
    if key in _chosen:
        return _chosen[key]
    with _choice_lock:
        if key in _chosen:
            return _chosen[key]
        path, loaded = choice_file(name), set(_models)
        figures = _remembered(path, float32)  # written whole by a rename: read without the lock
        if figures is None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with FileLock(path.with_suffix(".lock"), timeout=LOCK_SECONDS):
                    figures = _remembered(path, float32) or _measured(name, float32, path)
            except OSError as exc:  # filelock's Timeout is one too
                log.warning("the local model's precision was not measured, float32 kept (%s): %s", path, exc)
        try:
            _chosen[key] = better_runtime(figures, float32) if figures else float32
        finally:
            with _load_lock:
                for runtime in (float32, HALF):
                    if runtime != _chosen.get(key) and (name, runtime) not in loaded:
                        _models.pop((name, runtime), None)  # loaded only to be measured
        return _chosen[key]


def _measured(name: str, float32: str, path: Path) -> dict[str, dict[str, float]] | None:
    """Both runtimes measured, and kept at `path` when both could be (a runtime that failed is tried again at the
    next start)."""
    try:
        figures = _measure(name, (float32, HALF))
    except Exception as exc:  # noqa: BLE001 — a runtime that failed while timed: float32, measured next start
        log.warning("the local model's precision could not be measured, float32 kept: %s", exc)
        return None
    log.info("measured the local model %s on this CPU: %s", name, json.dumps(figures))
    if len(figures) == 2:
        try:
            _write(path, figures)
        except OSError as exc:
            log.warning("the local model's measured precision cannot be kept at %s: %s", path, exc)
    return figures or None


def _remembered(path: Path, float32: str) -> dict[str, dict[str, float]] | None:
    """The kept figures of both runtimes, or None where the file is missing or not whole."""
    fields = ("texts_per_second", "question_ms")
    try:
        kept = json.loads(path.read_text())
        figures = {runtime: {field: float(kept[runtime][field]) for field in fields} for runtime in (float32, HALF)}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return figures if all(value > 0 for figure in figures.values() for value in figure.values()) else None


def _write(path: Path, figures: dict) -> None:
    write_whole(path, json.dumps(figures, indent=1))
