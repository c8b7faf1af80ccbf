"""LOREKEEPER_EMBEDDINGS_PRECISION=auto on a CPU that multiplies bfloat16 natively: bfloat16 only where this machine
measured it faster. With AVX-512 BF16 and no AMX, PyTorch's bfloat16 can embed half the texts a second of ONNX
Runtime's float32; the CPU's instruction sets alone chose it there."""

import json
import multiprocessing
import time

import pytest

from apps.memories import embedding_local
from apps.memories.embedding_local import better_runtime, choice_file, local_model, local_runtime

MODEL = "all-MiniLM-L6-v2"


def _figures(onnx: tuple[float, float], bfloat16: tuple[float, float]) -> dict:
    return {
        runtime: {"texts_per_second": rate, "question_ms": question}
        for runtime, (rate, question) in (("onnx", onnx), ("torch-bfloat16", bfloat16))
    }


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

    def measure(name, runtime):
        raise AssertionError("measured again")

    # The next process on this machine reads the choice.
    monkeypatch.setattr(embedding_local, "_measure", measure)
    monkeypatch.setattr(embedding_local, "_chosen", {})
    assert local_runtime(MODEL) == runtime


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
    measured = []

    def measure(name, runtime):
        measured.append(runtime)
        return {"texts_per_second": 300.0 if runtime == "torch-bfloat16" else 100.0, "question_ms": 3.0}

    monkeypatch.setattr(embedding_local, "_measure", measure)
    auto.parent.mkdir(parents=True)
    auto.write_text(json.dumps(_figures((100.0, 4.0), (56.0, 12.0))))
    assert local_runtime(MODEL) == "onnx" and measured == []

    for damaged in ("{", json.dumps({"onnx": {"texts_per_second": 100.0}}), json.dumps(_figures((0, 4), (1, 1)))):
        auto.write_text(damaged)
        monkeypatch.setattr(embedding_local, "_chosen", {})
        assert local_runtime(MODEL) == "torch-bfloat16"
        assert measured[-2:] == ["onnx", "torch-bfloat16"]
        assert json.loads(auto.read_text())["torch-bfloat16"]["texts_per_second"] == 300.0
    assert len(measured) == 6


def test_only_auto_on_a_cpu_with_native_bfloat16_measures(settings, monkeypatch):
    def measure(name, runtime):
        raise AssertionError("measured")

    monkeypatch.setattr(embedding_local, "_measure", measure)
    monkeypatch.setattr(embedding_local, "_chosen", {})
    for precision, native, runtime in (("float32", True, "onnx"), ("bfloat16", False, "torch-bfloat16")):
        settings.LOREKEEPER_EMBEDDINGS_PRECISION = precision
        monkeypatch.setattr(embedding_local, "native_bfloat16", lambda native=native: native)
        assert local_runtime(MODEL) == runtime
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "auto"
    monkeypatch.setattr(embedding_local, "native_bfloat16", lambda: False)
    assert local_runtime(MODEL) == "onnx"


def test_the_choice_is_named_by_the_cpu_and_the_threads(settings, monkeypatch):
    monkeypatch.setattr(embedding_local, "_cpu", lambda: "model name : Xeon\nflags : avx512f avx512_bf16")
    first = choice_file(MODEL)
    assert choice_file(MODEL) == first and first.suffix == ".json"
    monkeypatch.setattr(embedding_local, "_cpu", lambda: "model name : Xeon\nflags : avx512f avx512_bf16 amx_tile")
    assert choice_file(MODEL) != first  # a VM shown other instructions measures again
    monkeypatch.setattr(embedding_local, "_cpu", lambda: "model name : Xeon\nflags : avx512f avx512_bf16")
    settings.LOREKEEPER_EMBEDDINGS_THREADS = 2
    assert choice_file(MODEL) != first


def _choose_in_a_process(queue) -> None:
    queue.put(local_runtime(MODEL))


def test_processes_starting_together_measure_once(auto, monkeypatch, tmp_path):
    """A web server's workers and a Celery worker start at once: the first measures, the others wait and read."""
    log = tmp_path / "measured"

    def measure(name, runtime):
        with open(log, "a") as file:
            file.write(f"{runtime}\n")
        time.sleep(0.5)
        return {"texts_per_second": 100.0, "question_ms": 4.0}

    monkeypatch.setattr(embedding_local, "_measure", measure)
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


def test_where_the_choice_cannot_be_kept_it_is_measured_for_the_process(auto, monkeypatch, tmp_path):
    blocked = tmp_path / "a file"
    blocked.write_text("")
    monkeypatch.setattr(embedding_local, "choice_file", lambda name: blocked / "models" / "choice.json")
    measured = []

    def measure(name, runtime):
        measured.append(runtime)
        return {"texts_per_second": 300.0 if runtime == "torch-bfloat16" else 100.0, "question_ms": 3.0}

    monkeypatch.setattr(embedding_local, "_measure", measure)
    assert local_runtime(MODEL) == "torch-bfloat16" and measured == ["onnx", "torch-bfloat16"]
    assert local_runtime(MODEL) == "torch-bfloat16" and len(measured) == 2  # once a process


def test_bfloat16_that_cannot_be_loaded_leaves_float32(auto, monkeypatch):
    def measure(name, runtime):
        if runtime == "torch-bfloat16":
            raise embedding_local.LocalModelUnavailable("sentence-transformers is not installed.")
        return {"texts_per_second": 100.0, "question_ms": 4.0}

    monkeypatch.setattr(embedding_local, "_measure", measure)
    assert local_runtime(MODEL) == "onnx"
    assert not auto.exists()  # nothing kept: the next start tries again
