"""How long each page of a long story takes to render: the pages of the browser walk (tests/common/
test_walk_browser.py) for one account with a 3,000-message chat.

    .venv/bin/python bench/pages.py [--runs 5] [--rebuild]

The account: a 3,000-message chat (its messages indexed as message memories, without vectors), 1,500 memories of
every kind the pipeline writes (facts, events, relationships, preferences, who knows what, open and settled threads,
details, the state ledger, a scene recap for each of the 150 scenes, profiles, the rolling summary, canon), 60
entities linked to them, 400 lifecycle decisions, 600 model calls, a persona, an API token, two devices and a backup.
Each page is fetched by Django's test client, signed in (in process: no network, no browser; what htmx loads after
a page is not counted, except the chat's pipeline panel, listed on its own): one warm-up, then --runs timed GETs.
Prints p50 and max in ms and the size of the answer. Test settings, in the database `lorekeeper_bench_pages`, kept
while complete (--rebuild makes it again).
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

from _switch import switched_off

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from context import PEOPLE, PLACES, THINGS, message_text, sentence  # noqa: E402

DATABASE = "lorekeeper_bench_pages"
USERNAME = "bench_pages"
MESSAGES, SCENE_LENGTH, CALLS, DECISIONS = 3000, 20, 600, 400
KINDS = [  # (kind, how many, scope): with the 150 scene recaps, 1,500 memories
    ("fact", 430, "character"),
    ("event", 250, "character"),
    ("relationship", 60, "character"),
    ("preference", 50, "character"),
    ("epistemic", 120, "chat"),
    ("arc", 60, "chat"),
    ("detail", 200, "chat"),
    ("revelation", 60, "chat"),
    ("development", 60, "chat"),
    ("state", 55, "chat"),
    ("profile", 3, "chat"),
    ("summary", 1, "chat"),
    ("canon", 1, "character"),
]
MEMORIES = sum(n for _, n, _ in KINDS) + MESSAGES // SCENE_LENGTH


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["LOREKEEPER_DATABASE_NAME"] = DATABASE
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    for name in ("httpx", "httpx2", "celery", "sentence_transformers", "apps", "django.request"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _complete(user) -> bool:
    from apps.extraction.models import Scene
    from apps.memories.models import Memory

    return (
        Memory.objects.filter(user=user).exclude(kind="message").count() == MEMORIES
        and Memory.objects.filter(user=user, kind="message").count() == MESSAGES
        and Scene.objects.filter(user=user).count() == MESSAGES // SCENE_LENGTH
    )


def build(rebuild: bool):
    """The account (made again unless it is there and complete); answers the user and the ids of the walk."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(username=USERNAME).first()
    if user is None or rebuild or not _complete(user):
        started = time.perf_counter()
        get_user_model().objects.filter(username=USERNAME).delete()
        user = get_user_model().objects.create_user(username=USERNAME, password="bench-password-1")
        _world(user, random.Random(7))
        print(f"(account built in {time.perf_counter() - started:.0f} s)")
    return user, _ids(user)


def _ids(user) -> dict:
    from apps.memories.models import Entity, Memory

    chat = user.chats.get()
    return {
        "at": MESSAGES // 2,
        "chat": chat.pk,
        "character": user.characters.get().pk,
        "connection": user.llm_connections.get().pk,
        "memory": Memory.objects.filter(user=user, kind="revelation").order_by("id").first().pk,
        "entity": Entity.objects.filter(user=user, name="Corvin").order_by("id").first().pk,
        "persona": user.personas.get().pk,
    }


def _world(user, rng: random.Random) -> None:
    from apps.accounts.services import api_token_create
    from apps.archives.models import Backup
    from apps.chats.models import Chat, Message
    from apps.chats.services.characters import character_create
    from apps.chats.services.chats import chat_create
    from apps.chats.services.personas import persona_create
    from apps.extraction.models import ChatPipeline, PipelineJob
    from apps.llm.services import connection_create
    from apps.memories.services import queue as memory_queue
    from apps.memories.services.indexing import chat_index_messages
    from apps.memories.services.schema import chat_schema_ensure
    from apps.sync.services.instances import instance_register

    character = character_create(user=user, name="Mira", description="A harbour clerk with a sharp eye.")
    chat = chat_create(user=user, title="The harbour ledger", character_ids=[character.pk], user_name="Rowan")
    chat_schema_ensure(chat=chat)
    Message.objects.bulk_create(
        (
            Message(chat=chat, index=i, name="Rowan" if i % 2 else "Mira", is_user=bool(i % 2),
                    mes=message_text(rng, i))
            for i in range(MESSAGES)
        ),
        batch_size=1000,
    )  # fmt: skip
    Chat.objects.filter(pk=chat.pk).update(message_count=MESSAGES)
    # Message memories without vectors: embedding 3,000 messages is the embedding bench's business, not this one's.
    with switched_off((memory_queue, "enqueue_embed_pending"), (memory_queue, "enqueue_index_chat")):
        chat_index_messages(chat_id=chat.pk)
    ChatPipeline.objects.update_or_create(
        chat=chat,
        defaults={
            "user": user,
            "approved_through": MESSAGES,
            "through": {tier: MESSAGES for tier in PipelineJob.Tier.values if tier not in ("rebuild", "recap")},
            "needs_plan": False,
        },
    )
    connection = connection_create(
        user=user, name="Home GPU", base_url="http://127.0.0.1:9/v1", model="qwen2.5-32b-instruct", api_key="sk-x"
    )
    _memories(user, character, chat, rng)
    _scenes(user, chat, rng)
    _calls(user, connection, rng)
    _decisions(user, rng)
    persona_create(user=user, name="Rowan", description="A courier who reads the tides better than maps.")
    api_token_create(user=user, name="SillyTavern on the desktop")
    instance_register(user=user, key="sillytavern-desktop", name="SillyTavern on the desktop")
    instance_register(user=user, key="phone", name="Phone", kind="phone", priority=10)
    Backup.objects.create(user=user, kind="backup", trigger="manual", state="done", size=48213, counts={"chats": 1})


def _memory_data(kind: str, n: int, rng: random.Random) -> tuple[str, dict]:
    """The content and data of the n-th memory of a kind, in the shape the pipeline writes it."""
    who, other = rng.sample(PEOPLE, 2)
    if kind == "relationship":
        words = rng.sample(["wary", "curious", "loyal", "jealous", "fond", "bitter"], 2)
        descriptors = [[words[0], "medium"], [words[1], "high"]]
        content = f"{who} -> {other}: {words[0]}(medium), {words[1]}(high)"
        return content, {"pair": [who.lower(), other.lower()], "descriptors": descriptors}
    if kind == "epistemic":
        return f"{who} knows: {sentence(rng)}", {"holder": who, "stance": rng.choice(["knows", "suspects", "hiding"])}
    if kind == "arc":
        thread = f"Find out who {rng.choice(['forged', 'stole', 'burned', 'hid'])} the {rng.choice(THINGS)}."
        if n % 3:
            return thread, {"status": "open", "persistent": False}
        return f"Settled: {sentence(rng)}", {"status": "resolved", "thread": thread, "persistent": False}
    if kind == "state":
        thing = f"{rng.choice(THINGS)} {n}"
        fields = {"owner": who, "location": rng.choice(PLACES)}
        return f"{thing} (object): owner={who} | location={fields['location']}", {
            "entity": thing, "key": thing.lower(), "type": "object", "fields": fields,
        }  # fmt: skip
    if kind == "profile":
        section = ["character_state", "world_state", "relationship_matrix"][n % 3]
        return " ".join(sentence(rng) for _ in range(6)), {"section": section, "built_through": MESSAGES}
    if kind == "summary":
        return " ".join(sentence(rng) for _ in range(80)), {"summary_end": MESSAGES, "parts": [], "extended_from": 0}
    if kind == "canon":
        return " ".join(sentence(rng) for _ in range(10)), {"written_through": MESSAGES}
    return sentence(rng), {}


def _memories(user, character, chat, rng: random.Random) -> None:
    from apps.memories.embeddings import text_hash
    from apps.memories.models import Entity, Memory

    known = set(Entity.objects.filter(user=user, character=character).values_list("name", flat=True))
    Entity.objects.bulk_create(
        Entity(user=user, character=character, name=name, type=kind)
        for kind, names in (("character", PEOPLE), ("place", PLACES), ("object", THINGS))
        for name in names
        if name not in known  # the character's own entity is there already
    )
    by_name = {entity.name: entity for entity in Entity.objects.filter(user=user, character=character)}
    rows = []
    for kind, count, scope in KINDS:
        for n in range(count):
            content, data = _memory_data(kind, n, rng)
            first = rng.randrange(MESSAGES - 40)
            rows.append(
                Memory(
                    user=user,
                    character=character if scope == "character" else None,
                    chat=chat if scope == "chat" else None,
                    source_chat=chat,
                    kind=kind,
                    content=content,
                    content_hash=text_hash(content),
                    data=data,
                    importance=rng.choice([1, 2, 2, 3]),
                    source_message_indices=list(range(first, first + rng.randrange(1, 40))),
                    valid_from=first,
                    origin="extraction",
                )
            )
    rows = Memory.objects.bulk_create(rows, batch_size=1000)
    links = Memory.entities.through
    linked = []
    for memory in rows:
        names = {word.strip(".,:") for word in memory.content.split()} & by_name.keys()
        linked += [links(memory_id=memory.pk, entity_id=by_name[name].pk) for name in names]
    links.objects.bulk_create(linked, batch_size=5000)


def _scenes(user, chat, rng: random.Random) -> None:
    from django.utils import timezone

    from apps.extraction.models import Scene
    from apps.memories.embeddings import text_hash
    from apps.memories.models import Memory

    now = timezone.now().isoformat()
    scenes = Scene.objects.bulk_create(
        Scene(
            user=user,
            chat=chat,
            start_index=start,
            end_index=start + SCENE_LENGTH,
            cue="time: “The next morning”",
            recap_versions=[
                {"version": 1, "content": f"{sentence(rng)} {sentence(rng)}", "created_at": now, "llm_call": None}
            ],
        )
        for start in range(0, MESSAGES, SCENE_LENGTH)
    )
    recaps = Memory.objects.bulk_create(
        Memory(
            user=user,
            chat=chat,
            source_chat=chat,
            kind="scene_recap",
            content=scene.recap_versions[0]["content"],
            content_hash=text_hash(scene.recap_versions[0]["content"]),
            data={"scene": scene.pk, "start": scene.start_index, "end": scene.end_index, "version": 1},
            source_message_indices=list(range(scene.start_index, scene.end_index)),
            valid_from=scene.start_index,
            origin="extraction",
        )
        for scene in scenes
    )
    for scene, recap in zip(scenes, recaps, strict=True):
        scene.recap_memory = recap
    Scene.objects.bulk_update(scenes, ["recap_memory"])


def _calls(user, connection, rng: random.Random) -> None:
    from apps.llm.models import Call

    purposes = ["extraction:session", "extraction:longterm", "scene_recap", "summary", "arcs", "ledger", "reply"]
    Call.objects.bulk_create(
        Call(
            user=user,
            connection=connection,
            purpose=rng.choice(purposes),
            template="extraction.facts_and_events@3",
            model=connection.model,
            status="ok" if i % 25 else "error",
            error="" if i % 25 else "Cannot reach the model: connection refused after 3 attempts",
            prompt_tokens=rng.randrange(800, 6000),
            completion_tokens=rng.randrange(50, 900),
            latency_ms=rng.randrange(800, 30000),
            response=sentence(rng) * 3,
        )
        for i in range(CALLS)
    )


def _decisions(user, rng: random.Random) -> None:
    from apps.memories.models import Decision, Memory

    memories = list(Memory.objects.filter(user=user).exclude(kind="message").values_list("pk", "kind", "content"))
    outcomes = ["passed", "passed", "rejected", "superseded", "uncertain"]
    Decision.objects.bulk_create(
        Decision(user=user, memory_id=pk, outcome=rng.choice(outcomes), kind=kind, content=content, method="embedding",
                 similarity=round(rng.uniform(0.3, 0.99), 2), reason="compared with the memories of its scope")
        for pk, kind, content in rng.sample(memories, DECISIONS)
    )  # fmt: skip


def measure(user, ids: dict, runs: int) -> None:
    from django.test import Client

    from tests.common.test_walk_browser import SIGNED_OUT, signed_in_pages

    signed_in = Client(raise_request_exception=True, HTTP_HOST="localhost")
    signed_in.force_login(user)
    signed_out = Client(raise_request_exception=True, HTTP_HOST="localhost")
    pages = [(signed_in, name, path) for name, path in signed_in_pages(ids).items()]
    pages += [(signed_in, "chat: pipeline panel", f"/chats/{ids['chat']}/pipeline/")]
    pages += [(signed_out, f"{name} (signed out)", path) for name, path in SIGNED_OUT.items()]
    print(f"\nPages of a {MESSAGES:,}-message chat, {MEMORIES:,} memories: 1 warm-up, then {runs} GETs each")
    print(f"{'page':<22} {'p50 ms':>8} {'max ms':>8} {'KB':>7}  address")
    for client, name, path in pages:
        response = client.get(path)  # warm-up (and the local embedding model loaded, for a search)
        if response.status_code != 200:
            raise SystemExit(f"{name} ({path}) answered {response.status_code}")
        timings = []
        for _ in range(runs):
            started = time.perf_counter()
            response = client.get(path)
            timings.append((time.perf_counter() - started) * 1000)
        size = len(response.content) / 1024
        print(f"{name:<22} {statistics.median(timings):8.0f} {max(timings):8.0f} {size:7.0f}  {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    _setup_django()
    user, ids = build(args.rebuild)
    measure(user, ids, args.runs)


if __name__ == "__main__":
    main()
