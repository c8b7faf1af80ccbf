"""Screenshots of the pages of a long story, as a person sees them on arrival: one screen (900 px tall) at a desktop's
width (1100 px) and a phone's (390 px), for the notes that close an issue.

    .venv/bin/python bench/screenshots.py [--root PATH] [--database NAME] [--out DIR] [--format png|jpeg]

The checkout at --root (this one unless given: an older commit unpacked elsewhere, `git archive <commit> | tar -x
-C /tmp/before`, with its .venv a link to this one's) serves the pages: its migrations run on the database named
(its own: the account is made again in it each run), the same small account is made there through its own code (a
3,000-message chat with its messages indexed and embedded by the local model, 150 scenes, 440 memories of every
kind the pipeline writes with a recap for each scene, entities, a model connection with its calls, two devices),
and its `runserver` serves them on a free loopback port (test settings: no debug pages, the static files from the
source folders). Debian's Chromium then signs in and takes the screenshots into --out (<page>-<width>.png, or
.jpg). Only fields and services that both the current code and the commit before issue 21's work (400e10b) have
are used, so before and after show one account.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
USERNAME, PASSWORD = "reader", "screenshots-password-1"
WIDTHS, HEIGHT = (1100, 390), 900
MESSAGES, SCENE_LENGTH, AT = 3000, 20, 100
SEARCH = "zzzzqqq"  # a query nothing matches, by words or by meaning

PEOPLE = "Mira Rowan Corvin Tessa Hale Brin Odo Sefa".split()
PLACES = "harbour lighthouse chapel market tavern warehouse bridge archive".split()
THINGS = "ledger seal key lantern map ring letter compass".split()
VERBS = "hid found stole burned sold mended buried forged".split()
KINDS = [  # (kind, how many, scope)
    ("fact", 80, "character"),
    ("event", 60, "character"),
    ("relationship", 6, "character"),
    ("preference", 10, "character"),
    ("epistemic", 20, "chat"),
    ("arc", 8, "chat"),
    ("detail", 60, "chat"),
    ("revelation", 30, "chat"),
    ("state", 12, "chat"),
    ("profile", 3, "chat"),
    ("summary", 1, "chat"),
]


def pages(ids: dict) -> dict[str, str]:
    """The pages shown, by the name of their screenshot; `None` for the landing page, which is seen signed out."""
    chat = ids["chat"]
    return {
        "landing": None,
        "chats": "/chats/",
        "chat": f"/chats/{chat}/",
        "chat-at": f"/chats/{chat}/?at={AT}",
        "story": f"/chats/{chat}/story/",
        "memories": "/memories/",
        "memories-search": f"/memories/?q={SEARCH}",
        "entities": "/memories/entities/",
        "models": "/llm/",
        "injection": "/memories/injection/",
        "context": f"/chats/{chat}/context/?message=What+did+Corvin+do+with+the+seal%3F",
        "devices": "/devices/",
        "settings": "/settings/",
        "api-docs": "/api/v1/docs/",
    }


# ------------------------------------------------------------------------------------ the account (in --root's code)


def _sentence(rng: random.Random) -> str:
    who, other = rng.sample(PEOPLE, 2)
    return (
        f"{who} {rng.choice(VERBS)} the {rng.choice(THINGS)} near the {rng.choice(PLACES)} "
        f"while {other} watched from the {rng.choice(PLACES)}."
    )


def _content(kind: str, n: int, rng: random.Random) -> tuple[str, dict]:
    """A memory's content and data, in the shape the pipeline writes them."""
    who, other = rng.sample(PEOPLE, 2)
    if kind == "relationship":
        return f"{who} -> {other}: wary(medium), curious(high)", {
            "pair": [who.lower(), other.lower()], "descriptors": [["wary", "medium"], ["curious", "high"]],
        }  # fmt: skip
    if kind == "epistemic":
        return f"{who} knows: {_sentence(rng)}", {"holder": who, "stance": "knows"}
    if kind == "arc":
        return f"Find out who {rng.choice(VERBS)} the {rng.choice(THINGS)}.", {"status": "open", "persistent": False}
    if kind == "state":
        thing = f"{rng.choice(THINGS)} {n}"
        return f"{thing} (object): owner={who}", {
            "entity": thing, "key": thing.lower(), "type": "object", "fields": {"owner": who},
        }  # fmt: skip
    if kind == "profile":
        section = ["character_state", "world_state", "relationship_matrix"][n % 3]
        return " ".join(_sentence(rng) for _ in range(4)), {"section": section, "built_through": MESSAGES}
    if kind == "summary":
        return " ".join(_sentence(rng) for _ in range(40)), {"summary_end": MESSAGES, "parts": [], "extended_from": 0}
    return _sentence(rng), {}


def seed() -> dict:
    """The account, made again; answers the ids the pages' addresses need. Runs in --root's Django."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from apps.accounts.services import api_token_create
    from apps.chats.models import Chat, Message
    from apps.chats.services.characters import character_create
    from apps.chats.services.chats import chat_create
    from apps.chats.services.personas import persona_create
    from apps.extraction.models import ChatPipeline, PipelineJob, Scene
    from apps.llm.models import Call
    from apps.llm.services import connection_create
    from apps.memories.embeddings import text_hash
    from apps.memories.models import Entity, Memory
    from apps.memories.services.indexing import chat_index_messages, memories_embed_pending
    from apps.memories.services.schema import chat_schema_ensure
    from apps.sync.services.instances import instance_register

    rng = random.Random(21)
    get_user_model().objects.filter(username=USERNAME).delete()
    user = get_user_model().objects.create_user(username=USERNAME, password=PASSWORD)
    character = character_create(user=user, name="Mira", description="A harbour clerk with a sharp eye.")
    chat = chat_create(user=user, title="The harbour ledger", character_ids=[character.pk], user_name="Rowan")
    chat_schema_ensure(chat=chat)
    Message.objects.bulk_create(
        (
            Message(chat=chat, index=i, name="Rowan" if i % 2 else "Mira", is_user=bool(i % 2),
                    mes=f'{_sentence(rng)} *{rng.choice(PEOPLE)} glances at the {rng.choice(THINGS)}.* "Turn {i}."')
            for i in range(MESSAGES)
        ),
        batch_size=1000,
    )  # fmt: skip
    Chat.objects.filter(pk=chat.pk).update(message_count=MESSAGES)
    chat.refresh_from_db()
    tiers = [tier for tier in PipelineJob.Tier.values if tier not in ("rebuild", "recap")]
    pipeline = {"user": user, "through": dict.fromkeys(tiers, MESSAGES), "needs_plan": False}
    if any(field.name == "approved_through" for field in ChatPipeline._meta.fields):
        pipeline["approved_through"] = MESSAGES  # the person ran the history's extraction (a field since 400e10b)
    ChatPipeline.objects.update_or_create(chat=chat, defaults=pipeline)
    connection = connection_create(
        user=user, name="Home GPU", base_url="http://127.0.0.1:9/v1", model="qwen2.5-32b-instruct", api_key="sk-x"
    )

    known = set(Entity.objects.filter(user=user, character=character).values_list("name", flat=True))
    Entity.objects.bulk_create(
        Entity(user=user, character=character, name=name, type=kind)
        for kind, names in (("character", PEOPLE), ("place", PLACES), ("object", THINGS))
        for name in names
        if name not in known
    )
    by_name = {entity.name: entity for entity in Entity.objects.filter(user=user, character=character)}
    rows = []
    for kind, count, scope in KINDS:
        for n in range(count):
            content, data = _content(kind, n, rng)
            first = rng.randrange(MESSAGES - 40)
            rows.append(
                Memory(user=user, character=character if scope == "character" else None,
                       chat=chat if scope == "chat" else None, source_chat=chat, kind=kind, content=content,
                       content_hash=text_hash(content), data=data, importance=rng.choice([1, 2, 2, 3]),
                       source_message_indices=list(range(first, first + rng.randrange(1, 30))), valid_from=first,
                       origin="extraction")
            )  # fmt: skip
    rows = Memory.objects.bulk_create(rows)
    links = Memory.entities.through
    links.objects.bulk_create(
        links(memory_id=memory.pk, entity_id=by_name[name].pk)
        for memory in rows
        for name in {word.strip(".,:") for word in memory.content.split()} & by_name.keys()
    )
    now = timezone.now().isoformat()
    for start in range(0, MESSAGES, SCENE_LENGTH):
        recap = f"{_sentence(rng)} {_sentence(rng)}"
        scene = Scene.objects.create(
            user=user, chat=chat, start_index=start, end_index=start + SCENE_LENGTH, cue="time: “The next morning”",
            recap_versions=[{"version": 1, "content": recap, "created_at": now, "llm_call": None}],
        )  # fmt: skip
        memory = Memory.objects.create(
            user=user, chat=chat, source_chat=chat, kind="scene_recap", content=recap, content_hash=text_hash(recap),
            data={"scene": scene.pk, "start": start, "end": start + SCENE_LENGTH, "version": 1},
            source_message_indices=list(range(start, start + SCENE_LENGTH)), valid_from=start, origin="extraction",
        )  # fmt: skip
        Scene.objects.filter(pk=scene.pk).update(recap_memory=memory)
    Call.objects.bulk_create(
        Call(user=user, connection=connection, purpose=rng.choice(["extraction:session", "scene_recap", "summary"]),
             model=connection.model, status="ok", prompt_tokens=rng.randrange(800, 6000),
             completion_tokens=rng.randrange(50, 900), latency_ms=rng.randrange(800, 30000), response=_sentence(rng))
        for _ in range(120)
    )  # fmt: skip
    persona_create(user=user, name="Rowan", description="A courier who reads the tides better than maps.")
    api_token_create(user=user, name="SillyTavern on the desktop")
    instance_register(user=user, key="sillytavern-desktop", name="SillyTavern on the desktop")
    instance_register(user=user, key="phone", name="Phone", kind="phone", priority=10)
    chat_index_messages(chat_id=chat.pk)
    memories_embed_pending(user_id=user.pk)  # the messages and memories, by the local model
    return {"chat": chat.pk}


# ------------------------------------------------------------------------------------------- server and browser


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _environment(root: Path, database: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.test",
        LOREKEEPER_DATABASE_NAME=database,
        LOREKEEPER_VAR_DIR=str(ROOT / "var"),  # one embedded PostgreSQL server for every checkout
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        TRANSFORMERS_VERBOSITY="error",
        PYTHONPATH=str(root),
    )
    return env


def _seeded(root: Path, env: dict[str, str]) -> dict:
    """Migrate and seed in a process of --root's own code; answers the ids it printed."""
    python = str(root / ".venv" / "bin" / "python")
    subprocess.run([python, "manage.py", "migrate", "--verbosity", "0"], cwd=root, env=env, check=True)
    program = (
        f"import sys, json; sys.path.insert(0, {str(root)!r}); import django; from apps.common import embedded; "
        "getattr(embedded, 'postgres_start', lambda: None)(); django.setup(); "
        f"sys.path.insert(1, {str(ROOT / 'bench')!r}); import screenshots; "
        "import apps; print('CODE', apps.__file__); print('IDS', json.dumps(screenshots.seed()))"
    )
    done = subprocess.run([python, "-c", program], cwd=root, env=env, check=True, capture_output=True, text=True)
    code = next(line for line in done.stdout.splitlines() if line.startswith("CODE "))
    if not code[5:].startswith(str(root)):
        raise SystemExit(f"the account was made by the wrong code: {code[5:]}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("IDS "))
    return json.loads(line[4:])


class Server:
    """`manage.py runserver` of the checkout at `root` on a free loopback port, with the given environment, waited
    for up to `seconds` (bench/readme_images.py uses it too)."""

    def __init__(self, root: Path, env: dict[str, str], seconds: float = 90):
        self.seconds = seconds
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [str(root / ".venv" / "bin" / "python"), "manage.py", "runserver", "--noreload"]
        self.process = subprocess.Popen(
            [*command, f"127.0.0.1:{self.port}"],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def __enter__(self):
        import httpx

        deadline = time.monotonic() + self.seconds
        while True:
            if self.process.poll() is not None:
                raise SystemExit("the server exited while starting")
            try:
                httpx.get(f"{self.url}/", timeout=5)
                return self
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start within {self.seconds:g} s") from None
                time.sleep(0.3)

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(timeout=30)


def _shoot(url: str, ids: dict, out: Path, image: str) -> list[str]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    taken = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        for width in WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": HEIGHT})
            page = context.new_page()
            signed_in = False
            for name, path in pages(ids).items():
                if path is None:  # signed out
                    page.goto(f"{url}/")
                else:
                    if not signed_in:
                        page.goto(f"{url}/accounts/login/")
                        page.fill("input[name=username]", USERNAME)
                        page.fill("input[name=password]", PASSWORD)
                        page.get_by_role("button", name="Sign in").click()
                        page.wait_for_load_state("networkidle")
                        if "/accounts/login/" in page.url:
                            raise SystemExit(f"could not sign in as {USERNAME}")
                        signed_in = True
                    page.goto(f"{url}{path}")
                try:
                    page.wait_for_load_state("networkidle", timeout=8000)
                except Exception:  # noqa: BLE001 — a page that keeps polling
                    pass
                page.wait_for_timeout(300)  # what the page's scripts do on arrival (scrolling to a message)
                target = out / f"{name}-{width}.{'jpg' if image == 'jpeg' else 'png'}"
                options = {"quality": 70} if image == "jpeg" else {}
                page.screenshot(path=str(target), type=image, **options)
                taken.append(target.name)
            context.close()
        browser.close()
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout that serves the pages")
    parser.add_argument("--database", default="lorekeeper_screenshots")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots" / "issue-21" / "after")
    parser.add_argument("--format", choices=("png", "jpeg"), default="png", help="jpeg: quality 70, smaller")
    args = parser.parse_args()
    root = args.root.resolve()
    env = _environment(root, args.database)
    started = time.perf_counter()
    ids = _seeded(root, env)
    print(f"account made in {args.database} by {root} in {time.perf_counter() - started:.0f} s")
    with Server(root, env) as server:
        taken = _shoot(server.url, ids, args.out.resolve(), args.format)
    total = sum((args.out / name).stat().st_size for name in taken)
    print(f"{len(taken)} screenshots in {args.out} ({total / 2**20:.1f} MB)")


if __name__ == "__main__":
    sys.exit(main())
