"""What World Info activation adds to building a reply's prompt: a 5,000-message chat linked to a 500-entry
lorebook, scanned as the web chat scans it before every reply.

    .venv/bin/python bench/lorebooks.py [--messages 5000] [--entries 500] [--builds 200] [--vectorized 0] [--small]

Data lives in its own database, `lorekeeper_bench_lorebooks`, made again each run. The book is shaped like the
ones people share: entries keyed by names, places and things (one in five with secondary keys and a selective
logic, one in ten a regular expression, one in twenty constant), inclusion groups, recursion on, some entries at a
depth, some sticky. The chat's messages mention them as a story does.

Each build is `chat_lore` (apps/lorebooks/services/lore.py), all of what a reply's prompt does for World Info: the
account's books and the chat's links read, the newest messages read, the scan (keys, recursion, groups, budget) and
the entries placed. The first build reads the book's entries from the database; later ones find them in the
process's cache until the book changes, so the first is printed apart. Prints p50/p95 (goal: p95 at most 20 ms)
and what the scans activated. Fails (exit 1) only on a broken result: a build that activates nothing.

`--vectorized N` flags N of the entries `vectorized` (apps/lorebooks/services/meaning.py): each build then also
embeds the newest messages with the local model and compares them with those entries. A new message is added to
the chat before each build (outside its time), as before every reply, so no build finds its query embedded already.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PEOPLE = "Mira Rowan Corvin Tessa Hale Brin Odo Sefa Ilse Varro Pell Wren Halloran Edric Tamsin Jory".split()
PLACES = "harbour lighthouse chapel market tavern warehouse bridge mill tower archive docks cellar orchard".split()
SAVED: dict = {}
THINGS = "ledger seal key lantern map ring dagger letter coin compass bell cloak barrel rope".split()


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["LOREKEEPER_DATABASE_NAME"] = "lorekeeper_bench_lorebooks"
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    for name in ("httpx", "celery", "sentence_transformers", "apps"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def book_entries(count: int, rng: random.Random, vectorized: int = 0) -> dict:
    """A book as SillyTavern's editor saves one (every field present), shaped as described above."""
    from apps.lorebooks.services.fields import FIELDS

    global SAVED
    SAVED = {name: default for name, (_, default) in FIELDS.items()}
    words = PEOPLE + PLACES + THINGS
    entries = {}
    for uid in range(count):
        name = f"{rng.choice(words)}{uid}" if uid >= len(words) else words[uid]
        content = f"{name} is linked to the {rng.choice(PLACES)} and the {rng.choice(THINGS)}. " * 3
        entry = SAVED | {"uid": uid, "key": [name, f"{name}'s"], "comment": f"About {name}", "content": content,
                         "order": rng.randint(1, 200)}  # fmt: skip
        if uid % 5 == 1:
            entry |= {"keysecondary": [rng.choice(PEOPLE), rng.choice(PLACES)], "selectiveLogic": uid % 4}
        if uid % 10 == 3:
            entry["key"] = [f"/\\b{name}(s|es)?\\b/i"]
        if uid % 20 == 7:
            entry["constant"] = True
        if uid % 8 == 2:
            entry |= {"group": f"g{uid % 3}"}
        if uid % 6 == 4:
            entry |= {"position": 4, "depth": rng.randint(0, 4), "role": rng.randint(0, 2)}
        if uid % 25 == 9:
            entry["sticky"] = 2
        if uid >= count - vectorized:
            entry["vectorized"] = True
        entries[str(uid)] = entry
    return {"entries": entries}


def build(messages: int, entries: int, rng: random.Random, vectorized: int = 0):
    from django.contrib.auth import get_user_model

    from apps.chats.services.chats import chat_create
    from apps.chats.services.writes import chat_append
    from apps.lorebooks.services.books import lorebook_import
    from tests.chats.factories import CharacterFactory

    get_user_model().objects.filter(username="bench_lorebooks").delete()
    user = get_user_model().objects.create(username="bench_lorebooks")
    character = CharacterFactory(user=user, name="Mira", description="Keeps the harbour lantern.")
    chat = chat_create(user=user, title="Bench", character_ids=[character.pk], user_name="Rowan")
    chat.chat_metadata = {"world_info": "Bench World"}
    chat.save(update_fields=["chat_metadata"])
    for start in range(0, messages, 500):
        lines = [{"name": "Rowan" if n % 2 else "Mira", "is_user": bool(n % 2),
                  "mes": f"{rng.choice(PEOPLE)} took the {rng.choice(THINGS)} to the {rng.choice(PLACES)}. Turn {n}."}
                 for n in range(start, min(start + 500, messages))]  # fmt: skip
        chat = chat_append(chat=chat, messages=lines, integrity=chat.integrity).chat
    lorebook_import(user=user, name="Bench World", data=book_entries(entries, rng, vectorized))
    return chat, character


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--entries", type=int, default=500)
    parser.add_argument("--builds", type=int, default=200)
    parser.add_argument("--vectorized", type=int, default=0, help="entries activated by meaning as well")
    parser.add_argument("--small", action="store_true", help="500 messages, 100 entries, 50 builds")
    args = parser.parse_args()
    if args.small:
        args.messages, args.entries, args.builds = 500, 100, 50
    _setup_django()
    from apps.chats.models import Chat
    from apps.chats.services.writes import chat_append
    from apps.llm.tokens import count_tokens
    from apps.lorebooks.services.lore import chat_lore

    rng = random.Random(7)
    chat, character = build(args.messages, args.entries, rng, args.vectorized)
    times, activated, by_meaning = [], [], []
    for n in range(args.builds + 1):
        chat = Chat.objects.get(pk=chat.pk)
        if args.vectorized:
            said = f"{rng.choice(PEOPLE)} asked about the {rng.choice(THINGS)} by the {rng.choice(PLACES)}, turn {n}."
            chat = chat_append(chat=chat, messages=[{"name": "Rowan", "is_user": True, "mes": said}],
                               integrity=chat.integrity).chat  # fmt: skip
        started = time.perf_counter()
        activation, info = chat_lore(
            chat=chat, character=character, names=("Mira", "Rowan"), persona="", max_context=16_000,
            count_tokens=count_tokens, resolve=lambda text: text, rng=random.Random(n),
        )  # fmt: skip
        took = (time.perf_counter() - started) * 1000
        if activation is None or not activation.entries:
            print("broken: a build activated nothing")
            return 1
        if n == 0:
            print(f"first build (the book read from the database): {took:.1f} ms")
            continue
        times.append(took)
        activated.append(len(activation.entries))
        by_meaning.append(sum(entry["why"].get("why") == "meaning" for entry in activation.entries))
    times.sort()
    p50, p95 = statistics.median(times), times[int(0.95 * (len(times) - 1))]
    print(f"{args.messages:,} messages, {args.entries} entries ({args.vectorized} vectorized), {args.builds} builds")
    print(f"activation per build: p50 {p50:.2f} ms, p95 {p95:.2f} ms (goal: p95 at most 20 ms)")
    print(f"entries activated per build: {min(activated)}–{max(activated)}, budget {info['budget']} tokens, "
          f"regex time p95-build {info['regex_ms']} ms")  # fmt: skip
    if args.vectorized:
        print(f"activated by meaning per build: {min(by_meaning)}–{max(by_meaning)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
