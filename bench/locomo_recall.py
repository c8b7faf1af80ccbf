"""LoCoMo retrieval with no LLM: the message recall layer and memory_search on the six development conversations.

    .venv/bin/python bench/locomo_recall.py [--data locomo-dev6.json] [--verbose]

Each conversation is imported as a SillyTavern chat (one message per turn, speaker as name, the session's date as
send_date, a shared photo's caption appended to its turn as "[shares a photo: …]"), indexed by the same task the API
triggers, and every question of categories 1–4 is asked through `memory_search` scoped to the chat. At a fixed budget
of turns (so a result spanning many turns gains nothing), results are walked in rank order collecting the distinct
turns each was made from (`source_message_indices`) up to k turns; recall_any@k scores a hit when an evidence turn is
among them, recall_all@k when all are. The data's default place is shared/benchmarks/locomo/ beside the repository.
Runs in its own database (`lorekeeper_bench`) with the deployment's embedding settings (local all-MiniLM-L6-v2 unless
LOREKEEPER_EMBEDDINGS_* say otherwise).

Target (issue 4): recall_any@10 over categories 1–4 above the published turn-retrieval 67.5. Also asks each
conversation ten strings of no language, which must answer no result (issue 21: a score means something); the
floor of a match by meaning (LOREKEEPER_SEARCH_MIN_SIMILARITY_MINILM) decides that.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "benchmarks" / "locomo" / "locomo-dev6.json"
KS = (5, 10, 25)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# Queries no turn of any conversation matches, in words or in meaning: a search must answer nothing to them.
NONSENSE = ["zzzzqqq", "xqvbnm plkj", "qwpoeiru", "asdfgh jklz", "mnbvcxz", "qazwsx edcrfv", "plmokn ijbuhv",
            "zxcvbnm", "wqxjz kvvq", "grblfnk"]  # fmt: skip


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("LOREKEEPER_DATABASE_NAME", "lorekeeper_bench")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def session_date(text: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" as ISO 8601."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").isoformat() + "Z"


def conversation_jsonl(sample: dict) -> tuple[bytes, dict[str, int]]:
    """The conversation as a SillyTavern chat file, and each turn's dia_id → message index."""
    conversation = sample["conversation"]
    lines = [
        {"user_name": conversation["speaker_a"], "character_name": conversation["speaker_b"], "chat_metadata": {}}
    ]
    index_of: dict[str, int] = {}
    session = 1
    while f"session_{session}_date_time" in conversation:
        date = session_date(conversation[f"session_{session}_date_time"])
        for turn in conversation.get(f"session_{session}") or []:
            text = turn["text"]
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            index_of[turn["dia_id"]] = len(lines) - 1
            lines.append(
                {
                    "name": turn["speaker"],
                    "is_user": turn["speaker"] == conversation["speaker_a"],
                    "is_system": False,
                    "send_date": date,
                    "mes": text,
                    "extra": {"locomo_dia_id": turn["dia_id"]},
                }
            )
        session += 1
    return b"\n".join(json.dumps(line).encode() for line in lines), index_of


def turns_at(results, k: int) -> list[int]:
    """The first k distinct turns the ranked results were made from."""
    turns: list[int] = []
    for hit in results:
        for index in hit.memory.source_message_indices:
            if index not in turns:
                turns.append(index)
            if len(turns) == k:
                return turns
    return turns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    _setup_django()
    import io

    from django.contrib.auth import get_user_model

    from apps.chats.services.chats import chat_import
    from apps.memories.embeddings import deployment_config, text_hash
    from apps.memories.models import EmbeddingCache
    from apps.memories.search import memory_search
    from apps.memories.services.indexing import chat_index_progress, message_content

    samples = json.loads(args.data.read_text())
    # A cold cache, so the indexing time includes the model's work on every turn.
    hashes = [
        text_hash(message_content(name=line["name"], mes=line["mes"]))
        for sample in samples
        for line in (json.loads(raw) for raw in conversation_jsonl(sample)[0].split(b"\n")[1:])
    ]
    EmbeddingCache.objects.filter(model=deployment_config().key, content_hash__in=hashes).delete()
    User = get_user_model()
    User.objects.filter(username="locomo-bench").delete()
    user = User.objects.create_user(username="locomo-bench")
    print(f"embeddings: {deployment_config().key or 'none'}; {len(samples)} conversations")

    hits = {(name, k): [] for name in ("any", "all") for k in KS}
    by_category = defaultdict(list)
    methods: dict[str, int] = defaultdict(int)
    latencies: list[float] = []
    index_seconds = 0.0
    turns_total = 0
    nonsense: list[float | None] = []  # the best relevance each query matching nothing got (None: no result)
    for sample in samples:
        body, index_of = conversation_jsonl(sample)
        started = time.perf_counter()
        # The import's commit runs the indexing task (eager under the test settings, as a worker would).
        chat = chat_import(user=user, stream=io.BytesIO(body), filename=f"{sample['sample_id']}.jsonl")
        index_seconds += time.perf_counter() - started
        progress = chat_index_progress(chat=chat)
        assert progress["pending"] == 0, progress
        turns_total += progress["indexed_messages"]
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            evidence = {index_of[e] for e in qa.get("evidence", []) if e in index_of}
            if not evidence:
                continue
            started = time.perf_counter()
            outcome = memory_search(user=user, query=qa["question"], chat_id=chat.pk, limit=60)
            latencies.append((time.perf_counter() - started) * 1000)
            methods[outcome.method] += 1
            for k in KS:
                found = set(turns_at(outcome.results, k))
                hits[("any", k)].append(bool(found & evidence))
                hits[("all", k)].append(evidence <= found)
            by_category[qa["category"]].append(bool(set(turns_at(outcome.results, 10)) & evidence))
            if args.verbose and not by_category[qa["category"]][-1]:
                print("MISS", qa["category"], qa["question"], sorted(evidence))
        for query in NONSENSE:
            found = memory_search(user=user, query=query, chat_id=chat.pk, limit=10).results
            nonsense.append(max((hit.relevance for hit in found), default=None))

    def pct(values: list[bool]) -> str:
        return f"{100 * sum(values) / len(values):.1f}"

    questions = len(hits[("any", 10)])
    print(f"indexed {turns_total} turns in {index_seconds:.1f} s (import + index + embed, cold cache)")
    print(f"questions (categories 1-4): {questions}; methods: {dict(methods)}")
    print("recall_any@5 {}  @10 {}  @25 {}".format(*(pct(hits[("any", k)]) for k in KS)))
    print(f"recall_all@10 {pct(hits[('all', 10)])}")
    for category, name in CATEGORIES.items():
        scores = by_category[category]
        print(f"  category {category} {name:12s} recall_any@10 {pct(scores)} ({len(scores)} questions)")
    print(
        f"search latency ms: p50 {statistics.median(latencies):.1f}, "
        f"p95 {statistics.quantiles(latencies, n=20)[18]:.1f}"
    )
    print("published turn retrieval (DRAGON): recall@5 58.8, @10 67.5, @25 79.9")
    answered = [value for value in nonsense if value is not None]
    print(f"queries matching nothing (strings of no language, {len(NONSENSE)} a conversation): "
          f"{len(answered)} of {len(nonsense)} answered results (goal 0)"
          + (f", best relevance {max(answered):.2f}" if answered else ""))  # fmt: skip
    user.delete()


if __name__ == "__main__":
    main()
