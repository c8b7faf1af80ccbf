"""Local embedding throughput, and the cache-hit path.

    .venv/bin/python bench/embeddings.py [--count 2000]

Texts are the turns of the LoCoMo development conversations (realistic chat lengths), each made unique with a
run nonce so the cache is cold. Prints sentences per second of the model alone (all-MiniLM-L6-v2 on the CPU, in calls
of 256 as the indexing makes them) in each runtime and precision (apps/memories/embedding_local.py: ONNX Runtime in
float32, PyTorch in float32 and bfloat16; ONNX Runtime has no bfloat16 kernels for this model on a CPU), each with the
cosine of its vectors to PyTorch float32's (those stored before ONNX Runtime was the default), and one question's
time; then of `embed_texts` with a cold cache (model + cache writes, in the configured runtime), and of `embed_texts`
when every text is already cached (no model call), plus the time to embed one 5-sentence search query cold and
cached. A run caps nothing: to measure as a CPU without AVX-512 would, ATEN_CPU_CAPABILITY=avx2 and
ONEDNN_MAX_CPU_ISA=AVX2 cap PyTorch; ONNX Runtime has no such switch and picks its kernels by the CPU.
Runs in the `lorekeeper_bench` database.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "benchmarks" / "locomo" / "locomo-dev6.json"


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("LOREKEEPER_DATABASE_NAME", "lorekeeper_bench")
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def turns(count: int) -> list[str]:
    texts: list[str] = []
    for sample in json.loads(DATA.read_text()):
        conversation = sample["conversation"]
        for key, value in conversation.items():
            if key.startswith("session_") and isinstance(value, list):
                texts += [f"{turn['speaker']}: {turn['text']}" for turn in value]
    return (texts * (count // len(texts) + 1))[:count]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=2000)
    args = parser.parse_args()
    _setup_django()
    from django.conf import settings

    from apps.memories.embedding_local import choice_file, local_encode, local_runtime, native_bfloat16
    from apps.memories.embeddings import deployment_config, embed_texts

    threads = settings.LOREKEEPER_EMBEDDINGS_THREADS

    config = deployment_config()
    if config.provider != "local":
        sys.exit(f"this bench measures the local provider; the deployment uses {config.key}")
    nonce = uuid.uuid4().hex[:8]
    texts = [f"{text} ({nonce}-{i})" for i, text in enumerate(turns(args.count))]
    mean_chars = sum(map(len, texts)) / len(texts)

    half = texts[: args.count // 2]
    rates, vectors, question_ms = {}, {}, {}
    for runtime in ("torch-float32", "onnx", "torch-bfloat16"):
        local_encode(config.model, texts[:8], runtime)  # load the model outside the measurement
        started = time.perf_counter()
        vectors[runtime] = np.concatenate(
            [local_encode(config.model, half[start : start + 256], runtime) for start in range(0, len(half), 256)]
        )
        rates[runtime] = len(half) / (time.perf_counter() - started)
        times = []
        for i in range(50):
            started = time.perf_counter()
            local_encode(config.model, [f"What did Caroline say about the support group {nonce}-{i}?"], runtime)
            times.append((time.perf_counter() - started) * 1000)
        question_ms[runtime] = statistics.median(times)
    cold = texts[args.count // 2 :]
    started = time.perf_counter()
    embed_texts(config, cold)
    cold_rate = len(cold) / (time.perf_counter() - started)

    started = time.perf_counter()
    embed_texts(config, cold)
    cached_seconds = time.perf_counter() - started

    query = [
        f"What did Caroline say about the support group {nonce}?",
        "She went there in May.",
        "Was it helpful?",
        "Who else came along?",
        "Did Melanie join her later?",
    ]
    started = time.perf_counter()
    embed_texts(config, query)
    query_cold_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    embed_texts(config, query)
    query_cached_ms = (time.perf_counter() - started) * 1000

    print(f"model {config.key}, {args.count} chat turns of {mean_chars:.0f} characters on average, CPU")
    names = {"torch-float32": "PyTorch float32", "onnx": "ONNX Runtime float32", "torch-bfloat16": "PyTorch bfloat16"}
    for runtime, name in names.items():
        cosines = np.sort((vectors[runtime] * vectors["torch-float32"]).sum(axis=1))
        print(
            f"model alone, {name + ':':22s}{rates[runtime]:8.1f} sentences/s "
            f"({rates[runtime] / rates['torch-float32']:.2f}x PyTorch float32; cosine to its vectors: min "
            f"{cosines[0]:.5f}, median {cosines[len(cosines) // 2]:.5f}); one question {question_ms[runtime]:.1f} ms"
        )
    print(f"the configured runtime on this CPU: {names[local_runtime(config.model)]}, {threads} thread(s)")
    kept = choice_file(config.model)
    if settings.LOREKEEPER_EMBEDDINGS_PRECISION == "auto" and native_bfloat16() and kept.exists():
        print(f"  (auto's choice, measured once on this machine: {json.dumps(json.loads(kept.read_text()))})")
    print(f"embed_texts, cold cache: {cold_rate:8.1f} sentences/s (model + cache writes)")
    print(
        f"embed_texts, all cached: {len(cold) / cached_seconds:8.1f} sentences/s "
        f"({cached_seconds * 1000 / len(cold):.3f} ms a sentence; {len(cold) / cached_seconds / cold_rate:.0f}x cold)"
    )
    print(f"5-sentence query: {query_cold_ms:.1f} ms cold, {query_cached_ms:.1f} ms cached")


if __name__ == "__main__":
    main()
