"""The README's two screenshots, made again from nothing: the web chat with a recall card open, and SillyTavern 1.19
with the extension's recall card under a message. 1280×800, Debian's Chromium through Playwright.

    .venv/bin/python bench/readme_images.py [web] [sillytavern] [--database NAME] [--out DIR]

Both run by default. The account (user "reader", password below) is made again each run in its own database of
the embedded PostgreSQL (test settings, the local embedding model), and `runserver` serves it on a free loopback
port. For the web chat: a character with a greeting, a persona, a short story, two memories the turn's recall
finds, and the recall of the last user message kept as the context builder keeps it. For SillyTavern: the cached
install of the end-to-end harness (tests/sillytavern/harness.py: installed and compiled on first use, minutes),
the extension from clients/sillytavern connected to that Lorekeeper (allowed by LOREKEEPER_CORS_ORIGINS), the
scripted model of the tests (tests/llm_server.py) writing the character's replies, and the story sent through
SillyTavern's own composer so that each user turn's recall arrives as it does for a person.

Writes web-chat.png and sillytavern-recall.png into --out (docs/images); an image over 300 KB is written as a
JPEG of quality 85 (.jpg) instead, and the README must then name that file.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

from screenshots import Server as RootServer  # noqa: E402 — manage.py runserver, waited for

CHROMIUM = "/usr/bin/chromium"
USERNAME, PASSWORD = "reader", "readme-images-password-1"
WIDTH, HEIGHT = 1280, 800
LIMIT = 300_000  # bytes

CHARACTER = "Mira"
PERSONA = "Rowan"
DESCRIPTION = (
    "Mira keeps the harbour ledger at Saltmere: every ship in, every ship out, every debt. Sharp-tongued, "
    "stubborn, and quietly afraid of the lighthouse on the point."
)
GREETING = (
    "*The harbour office smells of tar and wet paper. Mira looks up from the ledger, pen still in hand.* "
    "\"You're late, courier. The tide waited for you. I didn't.\""
)
STORY = [  # (speaker, text) after the greeting; the last user turn is the one whose recall is shown
    (PERSONA, '*I shake the rain off my coat and set the sealed satchel on her desk.* "The coast road washed out '
     'at Kestrel Point. I came the long way, along the cliffs."'),
    (CHARACTER, "*She breaks the seal with her thumbnail and skims the first page, frowning.* \"Another ship "
     "missing from the manifests. The *Gannet*, three weeks overdue, and the harbourmaster swears the lighthouse "
     'was lit every night."'),
    (PERSONA, '"Then someone\'s lying. Either the ship never sailed, or the light wasn\'t where it should be."'),
    (CHARACTER, "*Her pen stops. For a moment she doesn't look at you.* \"The light's been wrong before.\" *She "
     "closes the ledger.* \"I'm going up there tonight. You can come, or you can go and find a dry bed.\""),
    (PERSONA, "*I glance at the dark window, then back at her.* \"I've had worse offers. What do we need?\""),
    (CHARACTER, '"A lantern, a good knife, and something that tells north from wishful thinking. The fog comes '
     'in off the shoals by midnight."'),
    (PERSONA, "\"Before we go up: do you still have my grandmother's brass compass? It's never once lied "
     'about north."'),
    (CHARACTER, "*Mira opens the bottom drawer and lifts out the compass, wrapped in oilcloth.* \"I said I'd give "
     "it back by the spring tide. Tonight counts.\" *She presses it into your palm; her fingers linger a moment.* "
     "\"Stay close on the stairs. Tam used to say that lighthouse has more steps going down than going up.\""),
]  # fmt: skip
MEMORIES = [  # (kind, content, scope, importance): the important ones fill the long-term slot, the turn's recall
    # finds the minor ones the last message is about
    ("fact", "Mira keeps a second ledger of debts the harbourmaster does not know about.", "character", 3),
    ("fact", "Mira distrusts the harbourmaster, Corvin Hale, since he sold the old pier to a shipping company.",
     "character", 3),
    ("fact", "Rowan has carried the Saltmere post for two years and has never lost a satchel.", "chat", 3),
    ("event", "Rowan lent Mira his grandmother's brass compass; she promised to give it back by the spring tide.",
     "chat", 2),
    ("fact", "Mira's brother Tam vanished at the Saltmere lighthouse three winters ago; she has not climbed it "
     "since.", "character", 1),
    ("fact", "The Gannet is a Saltmere cutter carrying wool and salt; her captain owes the harbour two seasons of "
     "dues.", "chat", 1),
]  # fmt: skip


def _environment(database: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.test",
        LOREKEEPER_DATABASE_NAME=database,
        LOREKEEPER_VAR_DIR=str(ROOT / "var"),
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        TRANSFORMERS_VERBOSITY="error",
        PYTHONPATH=str(ROOT),
    )
    return env


def _django(env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM is used beside Playwright's event loop
    import django

    from apps.common import embedded

    embedded.postgres_start()
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _user():
    """The account, made again, with a long-term slot of 60 tokens (a story's standing memories fill it)."""
    from django.contrib.auth import get_user_model

    from apps.accounts.services import settings_document_get
    from apps.injection.services.settings import injection_settings_save

    get_user_model().objects.filter(username=USERNAME).delete()
    user = get_user_model().objects.create_user(username=USERNAME, password=PASSWORD)
    values = {"budgets": {"long": 60}}
    injection_settings_save(user=user, values=values, integrity=settings_document_get(user=user).integrity)
    return user


def _avatar(size: tuple[int, int] = (400, 600)) -> bytes:
    """A plain portrait-shaped avatar: a dusk sea, a lighthouse, the character's initial."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, (36, 52, 71))
    draw = ImageDraw.Draw(image)
    width, height = size
    for y in range(height // 2, height):  # the sea, darker towards the bottom
        shade = int(60 - 30 * (y - height / 2) / (height / 2))
        draw.line([(0, y), (width, y)], fill=(20, shade, shade + 30))
    draw.ellipse([width * 0.62, height * 0.14, width * 0.78, height * 0.25], fill=(238, 214, 160))
    draw.polygon(
        [(width * 0.22, height * 0.5), (width * 0.30, height * 0.22), (width * 0.36, height * 0.22),
         (width * 0.44, height * 0.5)], fill=(226, 222, 210),
    )  # fmt: skip
    draw.rectangle([width * 0.28, height * 0.17, width * 0.38, height * 0.22], fill=(250, 200, 90))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


# ----------------------------------------------------------------------------------------------- the web chat


def seed_web() -> tuple[int, int]:
    """The story of the web chat; answers the chat's id and the index of its last user message."""
    from django.core.files.base import ContentFile
    from django.utils import timezone

    from apps.chats.models import Chat, Message
    from apps.chats.services.characters import character_create
    from apps.chats.services.chats import chat_create
    from apps.chats.services.personas import persona_create
    from apps.extraction.models import ChatPipeline, PipelineJob
    from apps.injection.services.context import context_build
    from apps.llm.services import connection_create
    from apps.memories.services.indexing import chat_index_messages, memories_embed_pending
    from apps.memories.services.memories import memory_create
    from apps.memories.services.schema import chat_schema_ensure

    user = _user()
    character = character_create(user=user, name=CHARACTER, description=DESCRIPTION, first_mes=GREETING)
    character.avatar.save("mira.png", ContentFile(_avatar()), save=True)
    persona = persona_create(
        user=user, name=PERSONA, description="A courier who reads the tides better than maps.", is_default=True
    )
    chat = chat_create(
        user=user, title="The light on Saltmere point", character_ids=[character.pk], user_name=PERSONA,
        persona_id=persona.pk,
    )  # fmt: skip
    chat_schema_ensure(chat=chat)
    connection_create(
        user=user, name="Home GPU", base_url="http://127.0.0.1:9/v1", model="qwen2.5-32b-instruct", is_default=True
    )
    turns = [(CHARACTER, GREETING), *STORY]
    start = timezone.now() - timezone.timedelta(minutes=2 * len(turns))
    rows = [
        Message(chat=chat, index=i, name=name, is_user=name == PERSONA, mes=text,
                send_date=(start + timezone.timedelta(minutes=2 * i)).isoformat())
        for i, (name, text) in enumerate(turns)
    ]  # fmt: skip
    last_user = max(i for i, (name, _) in enumerate(turns) if name == PERSONA)
    Message.objects.bulk_create(rows[: last_user + 1])
    Chat.objects.filter(pk=chat.pk).update(message_count=last_user + 1)
    chat.refresh_from_db()
    for kind, content, scope, importance in MEMORIES:
        memory_create(
            user=user, kind=kind, content=content, importance=importance, origin="extraction", source_chat=chat,
            character=character if scope == "character" else None, chat=chat if scope == "chat" else None,
        )  # fmt: skip
    tiers = [tier for tier in PipelineJob.Tier.values if tier not in ("rebuild", "recap")]
    ChatPipeline.objects.update_or_create(
        chat=chat,
        defaults={"user": user, "through": dict.fromkeys(tiers, last_user + 1), "needs_plan": False,
                  "approved_through": last_user + 1},
    )  # fmt: skip
    chat_index_messages(chat_id=chat.pk)
    memories_embed_pending(user_id=user.pk)
    context_build(user=user, chat=chat, message=turns[last_user][1])  # the turn's recall, kept on its message
    Message.objects.bulk_create(rows[last_user + 1 :])
    Chat.objects.filter(pk=chat.pk).update(message_count=len(turns), integrity=uuid.uuid4())  # a new version
    chat_index_messages(chat_id=chat.pk)
    memories_embed_pending(user_id=user.pk)  # the reply too: the page's recall index is complete
    return chat.pk, last_user


def save(page, target: Path) -> Path:
    """A PNG, or a JPEG of quality 85 (the same name ending .jpg) when the PNG would be over LIMIT."""
    data = page.screenshot(type="png")
    target.with_suffix(".jpg").unlink(missing_ok=True)
    if len(data) > LIMIT:
        target = target.with_suffix(".jpg")
        from PIL import Image

        out = io.BytesIO()
        Image.open(io.BytesIO(data)).convert("RGB").save(out, format="JPEG", quality=85, optimize=True)
        data = out.getvalue()
    target.write_bytes(data)
    return target


SCROLL_TO_END = """() => {
    window.scrollTo(0, document.documentElement.scrollHeight);
    for (const e of document.querySelectorAll('*')) {
        if (e.scrollHeight > e.clientHeight + 4 && getComputedStyle(e).overflowY.match(/auto|scroll/)) {
            e.scrollTop = e.scrollHeight;
        }
    }
}"""


def shoot_web(env: dict[str, str], out: Path) -> Path:
    from playwright.sync_api import sync_playwright

    chat_id, last_user = seed_web()
    with RootServer(ROOT, env) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}).new_page()
        page.goto(f"{server.url}/accounts/login/")
        page.fill("input[name=username]", USERNAME)
        page.fill("input[name=password]", PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_load_state("networkidle")
        page.goto(f"{server.url}/chats/{chat_id}/")
        page.wait_for_load_state("networkidle")
        page.locator("details[data-panel=chat] > summary").click()  # the side column: persona, the chat's tools
        page.wait_for_load_state("networkidle")
        card = page.locator(f"#recall-slot-{last_user} details.recall-card")
        card.locator("> summary").click()
        card.locator(".recall-text").wait_for()
        page.wait_for_timeout(300)
        page.evaluate(SCROLL_TO_END)  # the chat at its end, as after a reply: the card and the reply in view
        page.wait_for_timeout(500)
        target = save(page, out / "web-chat.png")
        browser.close()
    return target


# -------------------------------------------------------------------------------------------------- SillyTavern


def shoot_sillytavern(env: dict[str, str], out: Path) -> Path:
    from playwright.sync_api import sync_playwright

    from apps.accounts.services import api_token_create
    from apps.chats.models import Character
    from apps.memories.services.indexing import memories_embed_pending
    from apps.memories.services.memories import memory_create
    from tests.llm_server import start_llm_server
    from tests.servers import free_port
    from tests.sillytavern import harness

    user = _user()
    _, token = api_token_create(user=user, name="SillyTavern on the desktop")
    model = start_llm_server()
    replies = [text for name, text in STORY if name == CHARACTER]
    asks = [text for name, text in STORY if name == PERSONA]
    for ask, reply in zip(asks, replies, strict=True):
        model.on(ask, reply, times=1)
    install = harness.sillytavern_install()
    st = harness.SillyTavern.create(
        install=install, root=Path(tempfile.mkdtemp(prefix="lk-readme-st-")), port=free_port()
    )
    env = env | {"LOREKEEPER_CORS_ORIGINS": st.origin}
    extension = {"server_url": "", "api_token": token, "sync": True, "inject": True, "timeout_ms": 20_000}
    try:
        with RootServer(ROOT, env) as server:
            extension["server_url"] = server.url
            settings = harness.user_settings(install, model_url=model.url, extension=extension)
            settings["power_user"]["persona_description"] = "A courier who reads the tides better than maps."
            settings["username"] = PERSONA
            st.write_settings(settings)
            st.install_extension()
            avatar = st.add_character(CHARACTER, first_mes=GREETING, description=DESCRIPTION)
            card = (st.user_dir / "characters" / avatar).read_bytes()
            _with_portrait(st.user_dir / "characters" / avatar, card)
            st.start()
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=harness.chromium_path(), args=harness.CHROMIUM_FLAGS
                )
                page = harness.open_sillytavern(browser, st)
                page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
                harness.open_character(page, CHARACTER)
                page.evaluate("() => SillyTavern.getContext().saveChat()")
                harness.wait_until(
                    lambda: Character.objects.filter(user=user, name=CHARACTER).exists(),
                    timeout=60, message="the extension mirrored the chat",
                )  # fmt: skip
                character = Character.objects.get(user=user, name=CHARACTER)
                for kind, content, _scope, importance in MEMORIES:
                    memory_create(
                        user=user, kind=kind, content=content, importance=importance, origin="extraction",
                        character=character,
                    )  # fmt: skip
                memories_embed_pending(user_id=user.pk)
                for ask in asks:
                    harness.send_message(page, ask, timeout=90)
                last = len(harness.live_chat(page)) - 2
                recall = page.locator(f'#chat .mes[mesid="{last}"] .lorekeeper-recall')
                recall.wait_for(timeout=30_000)
                recall.locator("summary").first.click()
                page.wait_for_timeout(500)
                page.evaluate("() => { const c = document.getElementById('chat'); c.scrollTop = c.scrollHeight; }")
                page.wait_for_timeout(800)
                target = save(page, out / "sillytavern-recall.png")
                browser.close()
    finally:
        st.stop()
        model.stop()
    return target


def _with_portrait(path: Path, card_png: bytes) -> None:
    """The card's `chara` chunk on a real portrait instead of the harness's 1×1 pixel."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    chara = Image.open(io.BytesIO(card_png)).text["chara"]
    info = PngInfo()
    info.add_text("chara", chara)
    Image.open(io.BytesIO(_avatar())).save(path, format="PNG", pnginfo=info)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", nargs="*", choices=("web", "sillytavern"), default=["web", "sillytavern"])
    parser.add_argument("--database", default="lorekeeper_readme_images")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = _environment(args.database)
    _django(env)
    for which in args.which or ["web", "sillytavern"]:
        target = (shoot_web if which == "web" else shoot_sillytavern)(env, out)
        print(f"{target} ({target.stat().st_size / 1000:.0f} KB)")


if __name__ == "__main__":
    main()
