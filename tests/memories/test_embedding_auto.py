"""LOREKEEPER_EMBEDDINGS_PRECISION=auto on a CPU that multiplies bfloat16 natively: bfloat16 only where this machine
measured it faster. With AVX-512 BF16 and no AMX, PyTorch's bfloat16 can embed half the texts a second of ONNX
Runtime's float32; the CPU's instruction sets alone chose it there."""

import json
import multiprocessing
import time

import filelock
import pytest

from apps.memories import embedding_local
from apps.memories.embedding_local import better_runtime, choice_file, local_model, local_runtime

MODEL = "all-MiniLM-L6-v2"


def _figures(onnx: tuple[float, float], bfloat16: tuple[float, float]) -> dict:
    return {
        runtime: {"texts_per_second": rate, "question_ms": question}
        for runtime, (rate, question) in (("onnx", onnx), ("torch-bfloat16", bfloat16))
    }


class Fake:
    """A stand-in for `_measure`: each runtime's figures from `one(runtime)` (raising LocalModelUnavailable leaves
    it out, as the real one leaves out a runtime that fails), and the runtimes it was asked for, in `calls`."""

    def __init__(self, one=None) -> None:
        self.one = one or (lambda runtime: {"texts_per_second": 100.0, "question_ms": 4.0})
        self.calls: list[str] = []

    def __call__(self, name, runtimes):
        figures = {}
        for runtime in runtimes:
            self.calls.append(runtime)
            try:
                figures[runtime] = self.one(runtime)
            except embedding_local.LocalModelUnavailable:
                pass
        return figures


def _faster_in(winner: str):
    return lambda runtime: {"texts_per_second": 300.0 if runtime == winner else 100.0, "question_ms": 3.0}


@pytest.fixture
def auto(settings, monkeypatch, tmp_path):
    """auto on a CPU with native bfloat16, a fresh process's state, and the choice kept under tmp_path."""
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "auto"
    monkeypatch.setattr(embedding_local, "native_bfloat16", lambda: True)
    monkeypatch.setattr(embedding_local, "_chosen", {})
    path = tmp_path / "models" / "choice.json"
    monkeypatch.setattr(embedding_local, "choice_file", lambda name: path)
    return path


def test_auto_measures_both_runtimes_on_this_machine_once_and_keeps_the_faster(auto, monkeypatch):
    monkeypatch.setattr(embedding_local, "_models", {})  # as a process starting: neither runtime loaded
    runtime = local_runtime(MODEL)
    figures = json.loads(auto.read_text())
    assert set(figures) == {"onnx", "torch-bfloat16"}
    assert all(figures[r]["texts_per_second"] > 0 and figures[r]["question_ms"] > 0 for r in figures)
    assert runtime == better_runtime(figures, "onnx")
    loser = "onnx" if runtime == "torch-bfloat16" else "torch-bfloat16"
    assert (MODEL, loser) not in embedding_local._models  # loaded only to be measured
    assert local_model(MODEL).encode(["Mira: The lantern went out."]).shape == (1, 384)

    # The next process on this machine reads the figures.
    fake = Fake()
    monkeypatch.setattr(embedding_local, "_measure", fake)
    monkeypatch.setattr(embedding_local, "_chosen", {})
    assert local_runtime(MODEL) == runtime and fake.calls == []


@pytest.mark.parametrize(
    ("onnx", "bfloat16", "chosen"),
    [
        ((105.3, 4.3), (56.3, 12.7), "onnx"),  # AVX-512 BF16 without AMX (a 2-vCPU Xeon)
        ((74.0, 6.0), (220.0, 4.5), "torch-bfloat16"),  # with AMX: about 3x
        ((100.0, 4.0), (105.0, 3.0), "onnx"),  # not enough faster to leave float32's vectors
        ((100.0, 4.0), (150.0, 7.0), "onnx"),  # faster in batches, but a question takes 1.75x as long
        ((100.0, 4.0), (150.0, 5.5), "torch-bfloat16"),
    ],
)
def test_bfloat16_is_chosen_only_well_ahead_in_batches_and_not_far_behind_on_a_question(onnx, bfloat16, chosen):
    assert better_runtime(_figures(onnx, bfloat16), "onnx") == chosen


def test_a_kept_choice_is_read_and_a_damaged_one_measured_again(auto, monkeypatch):
    fake = Fake(_faster_in("torch-bfloat16"))
    monkeypatch.setattr(embedding_local, "_measure", fake)
    auto.parent.mkdir(parents=True)
    auto.write_text(json.dumps(_figures((100.0, 4.0), (56.0, 12.0))))
    assert local_runtime(MODEL) == "onnx" and fake.calls == []

    for damaged in ("{", json.dumps({"onnx": {"texts_per_second": 100.0}}), json.dumps(_figures((0, 4), (1, 1)))):
        auto.write_text(damaged)
        monkeypatch.setattr(embedding_local, "_chosen", {})
        assert local_runtime(MODEL) == "torch-bfloat16"
        assert fake.calls[-2:] == ["onnx", "torch-bfloat16"]
        assert json.loads(auto.read_text())["torch-bfloat16"]["texts_per_second"] == 300.0
    assert len(fake.calls) == 6
    assert not list(auto.parent.glob("*.tmp"))


def test_only_auto_on_a_cpu_with_native_bfloat16_measures(settings, monkeypatch):
    fake = Fake()
    monkeypatch.setattr(embedding_local, "_measure", fake)
    monkeypatch.setattr(embedding_local, "_chosen", {})
    for precision, native, runtime in (("float32", True, "onnx"), ("bfloat16", False, "torch-bfloat16")):
        settings.LOREKEEPER_EMBEDDINGS_PRECISION = precision
        monkeypatch.setattr(embedding_local, "native_bfloat16", lambda native=native: native)
        assert local_runtime(MODEL) == runtime
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "auto"
    monkeypatch.setattr(embedding_local, "native_bfloat16", lambda: False)
    assert local_runtime(MODEL) == "onnx"
    assert fake.calls == []


def test_the_figures_are_named_by_the_cpu_the_threads_and_the_packages(settings, monkeypatch):
    monkeypatch.setattr(embedding_local, "_cpu", lambda: "model name : Xeon\nflags : avx512f avx512_bf16")
    first = choice_file(MODEL)
    assert choice_file(MODEL) == first and first.suffix == ".json"
    monkeypatch.setattr(embedding_local, "_cpu", lambda: "model name : Xeon\nflags : avx512f avx512_bf16 amx_tile")
    assert choice_file(MODEL) != first  # a VM shown other instructions measures again
    monkeypatch.setattr(embedding_local, "_cpu", lambda: "model name : Xeon\nflags : avx512f avx512_bf16")
    monkeypatch.setattr(embedding_local, "MEASURED_SO", embedding_local.MEASURED_SO + 1)
    assert choice_file(MODEL) != first  # measured another way
    monkeypatch.setattr(embedding_local, "MEASURED_SO", embedding_local.MEASURED_SO - 1)
    assert choice_file(MODEL) == first
    settings.LOREKEEPER_EMBEDDINGS_THREADS = 2
    assert choice_file(MODEL) != first


def _choose_in_a_process(queue) -> None:
    queue.put(local_runtime(MODEL))


def test_processes_starting_together_measure_once(auto, monkeypatch, tmp_path):
    """A web server's workers and a Celery worker start at once: the first measures, the others wait and read."""
    log = tmp_path / "measured"

    def one(runtime):
        with open(log, "a") as file:
            file.write(f"{runtime}\n")
        time.sleep(0.5)
        return {"texts_per_second": 100.0, "question_ms": 4.0}

    monkeypatch.setattr(embedding_local, "_measure", Fake(one))
    context = multiprocessing.get_context("fork")  # the children inherit the patched functions and settings
    queue = context.Queue()
    children = [context.Process(target=_choose_in_a_process, args=(queue,)) for _ in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(30)
        assert child.exitcode == 0
    assert sorted(queue.get(timeout=5) for _ in children) == ["onnx"] * 3
    assert log.read_text().split() == ["onnx", "torch-bfloat16"]


def _no_lock(error: OSError):
    def lock(path, timeout):
        raise error

    return lock


@pytest.mark.parametrize("error", [PermissionError(13, "Permission denied"), filelock.Timeout("choice.lock")])
def test_where_nothing_is_kept_and_the_lock_cannot_be_had_float32_is_kept_unmeasured(auto, monkeypatch, error):
    """A read-only image, or another process measuring past LOCK_SECONDS: no process measures on its own (they would
    all at once, and could choose apart). Figures already kept are read without the lock."""
    fake = Fake(_faster_in("torch-bfloat16"))
    monkeypatch.setattr(embedding_local, "_measure", fake)
    monkeypatch.setattr(embedding_local, "FileLock", _no_lock(error))
    assert local_runtime(MODEL) == "onnx" and fake.calls == []

    auto.parent.mkdir(parents=True, exist_ok=True)
    auto.write_text(json.dumps(_figures((100.0, 4.0), (300.0, 3.0))))
    monkeypatch.setattr(embedding_local, "_chosen", {})
    assert local_runtime(MODEL) == "torch-bfloat16" and fake.calls == []


def test_a_runtime_that_cannot_be_loaded_leaves_the_other(auto, monkeypatch):
    def no_bfloat16(runtime):
        if runtime == "torch-bfloat16":
            raise embedding_local.LocalModelUnavailable("sentence-transformers is not installed.")
        return {"texts_per_second": 100.0, "question_ms": 4.0}

    monkeypatch.setattr(embedding_local, "_measure", Fake(no_bfloat16))
    assert local_runtime(MODEL) == "onnx"
    assert not auto.exists()  # nothing kept: the next start tries again

    def no_onnx(runtime):
        if runtime == "onnx":
            raise embedding_local.LocalModelUnavailable("the export could not be written")
        return {"texts_per_second": 100.0, "question_ms": 4.0}

    monkeypatch.setattr(embedding_local, "_measure", Fake(no_onnx))
    monkeypatch.setattr(embedding_local, "_chosen", {})
    assert local_runtime(MODEL) == "torch-bfloat16"  # before auto measured, this CPU ran bfloat16: it still can
    assert not auto.exists()


def test_a_runtime_that_fails_while_measured_is_left_out(auto, monkeypatch):
    """The real measurement, with bfloat16's encode failing (an error of PyTorch's, not a load error)."""

    class Broken:
        def encode(self, texts):
            raise RuntimeError("oneDNN: could not create a primitive")

    real = embedding_local.local_model
    monkeypatch.setattr(embedding_local, "_models", {})
    monkeypatch.setattr(
        embedding_local,
        "local_model",
        lambda name, runtime=None: Broken() if runtime == "torch-bfloat16" else real(name, runtime),
    )
    assert local_runtime(MODEL) == "onnx"
    assert not auto.exists()
    assert (MODEL, "onnx") in embedding_local._models
