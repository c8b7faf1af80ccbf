"""Local embedding throughput, and the cache-hit path.

    .venv/bin/python bench/embeddings.py [--count 2000]

Texts are the turns of the LoCoMo development conversations (realistic chat lengths), each made unique with a
run nonce so the cache is cold. Prints sentences per second of the model alone (sentence-transformers,
all-MiniLM-L6-v2 on the CPU) in float32 and in bfloat16 (LOREKEEPER_EMBEDDINGS_PRECISION), with the cosine between
the two precisions' vectors of the same texts; then of `embed_texts` with a cold cache (model + cache writes), and of
`embed_texts` when every text is already cached (no model call), plus the time to embed one 5-sentence search query
cold and cached.
Runs in the `lorekeeper_bench` database.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

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

    from apps.memories.embeddings import _embed_local, deployment_config, embed_texts, local_bfloat16

    config = deployment_config()
    if config.provider != "local":
        sys.exit(f"this bench measures the local provider; the deployment uses {config.key}")
    nonce = uuid.uuid4().hex[:8]
    texts = [f"{text} ({nonce}-{i})" for i, text in enumerate(turns(args.count))]
    _embed_local(config, texts[:8])  # load the model outside the measurement
    mean_chars = sum(map(len, texts)) / len(texts)

    half = texts[: args.count // 2]
    rates, vectors = {}, {}
    for precision in ("float32", "bfloat16"):
        settings.LOREKEEPER_EMBEDDINGS_PRECISION = precision
        started = time.perf_counter()
        vectors[precision] = _embed_local(config, half)
        rates[precision] = len(half) / (time.perf_counter() - started)
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "auto"
    cosines = sorted(
        sum(x * y for x, y in zip(a, b, strict=True))
        for a, b in zip(vectors["float32"], vectors["bfloat16"], strict=True)
    )

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
    print(f"model alone, float32:    {rates['float32']:8.1f} sentences/s")
    print(
        f"model alone, bfloat16:   {rates['bfloat16']:8.1f} sentences/s ({rates['bfloat16'] / rates['float32']:.1f}x; "
        f"cosine to float32's vectors: min {cosines[0]:.5f}, median {cosines[len(cosines) // 2]:.5f}); "
        f"auto chooses {'bfloat16' if local_bfloat16() else 'float32'} on this CPU"
    )
    print(f"embed_texts, cold cache: {cold_rate:8.1f} sentences/s (model + cache writes)")
    print(
        f"embed_texts, all cached: {len(cold) / cached_seconds:8.1f} sentences/s "
        f"({cached_seconds * 1000 / len(cold):.3f} ms a sentence; {len(cold) / cached_seconds / cold_rate:.0f}x cold)"
    )
    print(f"5-sentence query: {query_cold_ms:.1f} ms cold, {query_cached_ms:.1f} ms cached")


if __name__ == "__main__":
    main()
