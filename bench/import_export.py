"""Import and export of generated SillyTavern chats: seconds and peak RSS of each.

    .venv/bin/python bench/import_export.py [--sizes 1000 10000]

Each measurement runs in a fresh process (so its peak RSS is its own) against the embedded PostgreSQL, in a
database of its own (`lorekeeper_bench`, migrated on first use; or DATABASE_URL when set). Import goes through
`chat_import` reading the file from disk, export through `chat_export_lines` writing to a file: the same code the
API and the web pages call. Targets (issue 2): 10x the messages in at most 12x the import time, and the peak RSS
of the small and the large import within 50 MB of each other.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORDS = "the lantern keeper storm sea ferry key letter lighthouse harbour reef green glass night dawn salt".split()


def generate(path: Path, messages: int, seed: int = 7) -> int:
    """A chat of about 2 KB a message: long text, swipes on a third of the replies, SillyTavern's extra keys."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        header = {"chat_metadata": {"integrity": "bench", "note_prompt": "", "smartMemory": {"v": 1}}}
        out.write(json.dumps({**header, "user_name": "unused", "character_name": "unused"}) + "\n")
        for i in range(messages):
            is_user = i % 2 == 1
            text = " ".join(rng.choices(WORDS, k=200)) + f" ✨ #{i}"
            message = {
                "name": "You" if is_user else "Mira",
                "is_user": is_user,
                "is_system": False,
                "send_date": f"2026-01-01T00:{i % 60:02d}:00.000Z",
                "mes": text,
                "extra": {}
                if is_user
                else {"api": "openai", "model": "bench", "token_count": 300, "reasoning": text[:300]},
            }
            if not is_user and i % 3 == 0:
                message["swipes"] = [text, text[::-1]]
                message["swipe_id"] = 0
                message["swipe_info"] = [{"send_date": message["send_date"], "extra": {"api": "openai"}}] * 2
            out.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n")
    return path.stat().st_size


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("LOREKEEPER_DATABASE_NAME", "lorekeeper_bench")
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports kilobytes


def run_one(operation: str, argument: str) -> dict:
    """In a child process: `import PATH` (measured, then deleted), `prepare PATH` (an unmeasured import, left in
    place for the export) or `export CHAT_ID` (measured, then the chat is deleted)."""
    _setup_django()
    from django.contrib.auth import get_user_model

    from apps.chats.models import Chat
    from apps.chats.services.chats import chat_export_lines, chat_import

    user, _ = get_user_model().objects.get_or_create(username="bench")
    baseline = _peak_rss_mb()
    started = time.perf_counter()
    if operation in ("import", "prepare"):
        path = Path(argument)
        with path.open("rb") as stream:
            chat = chat_import(user=user, stream=stream, filename=path.name)
        if operation == "prepare":
            return {"chat_id": chat.pk}
    else:
        chat = Chat.objects.get(pk=int(argument), user=user)
        with open(os.devnull, "wb") as out:
            for part in chat_export_lines(chat=chat):
                out.write(part)
    seconds = time.perf_counter() - started
    chat.delete()
    return {"seconds": seconds, "peak_rss_mb": _peak_rss_mb(), "baseline_rss_mb": baseline}


def child(operation: str, argument: str) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--child", operation, argument], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(*args.child)))
        return

    _setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"bench-{size}.jsonl"
            mb = generate(path, size) / 1e6
            chat_id = child("prepare", str(path))["chat_id"]
            results[size] = {"import": child("import", str(path)), "export": child("export", str(chat_id))}
            for op, r in results[size].items():
                print(
                    f"{op:6} {size:>7,} messages ({mb:5.1f} MB): {r['seconds']:6.2f} s, "
                    f"peak RSS {r['peak_rss_mb']:6.1f} MB (process baseline {r['baseline_rss_mb']:.1f} MB)"
                )
    if len(args.sizes) >= 2:
        small, large = min(args.sizes), max(args.sizes)
        factor = large / small
        for op in ("import", "export"):
            ratio = results[large][op]["seconds"] / results[small][op]["seconds"]
            rss_gap = results[large][op]["peak_rss_mb"] - results[small][op]["peak_rss_mb"]
            print(
                f"{op}: {factor:.0f}x the messages took {ratio:.1f}x the time; peak RSS differs by {rss_gap:+.1f} MB"
            )


if __name__ == "__main__":
    main()
