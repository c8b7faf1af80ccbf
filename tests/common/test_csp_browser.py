"""Every page a person reaches, under the production server (gunicorn, uvicorn worker), in a real headless Chromium,
keeps its Content-Security-Policy (apps/common/csp.py) without one violation: signed out (landing, sign-in,
sign-up, the 404 page), signed in (the menu's pages and those the chat page links to, a reply streamed from the
scripted model, the API docs) and the admin. The behaviours moved out of inline handlers still work (a form that
asks before it acts, a recall card's write sending the chat's integrity). Markup in a stored message does not run:
nh3 drops it, and an inline handler put into the page past nh3 is refused by the policy."""

from __future__ import annotations

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connections

from apps.accounts.services import api_token_create
from apps.archives.models import Backup
from apps.chats.services.messages import message_append
from apps.chats.services.personas import persona_create
from apps.chats.services.start import chat_start
from apps.llm.services import connection_create
from apps.memories.models import Entity
from apps.memories.services.memories import memory_create
from apps.sync.services.instances import instance_register
from tests.browsers import chromium, screenshot
from tests.chats.factories import CharacterFactory
from tests.common.test_walk_browser import SIGNED_OUT, signed_in_pages
from tests.llm_server import Reply
from tests.servers import gunicorn

# The production server, some forty pages and a streamed reply: about a minute and a half, marked slow to keep make
# test within its 10 minutes; .ci/run runs it after make test.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.slow]

PASSWORD = "correct horse battery"
FOLDER = "csp"
HOSTILE = (
    'Look: <img src="data:image/png;base64,AAAA" onerror="window.__pwned = \'img\'"> '
    '<script>window.__pwned = "script"</script> <a href="javascript:window.__pwned=\'link\'">the map</a> '
    "<svg onload=\"window.__pwned = 'svg'\"></svg>"
)
# Kept by the browser before any page script runs (Playwright's init script is not the page's, so the policy does
# not apply to it): every violation of the policy on the page, as "directive blocked-uri (source:line)".
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI} (${event.sourceFile}:${event.lineNumber})`);
});
"""


@pytest.fixture
def site(monkeypatch, user, llm_server, broker):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    user.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    user.is_staff = user.is_superuser = True
    user.save(update_fields=["password", "is_staff", "is_superuser"])
    mira = CharacterFactory(user=user, name="Mira", first_mes="Evening, {{user}}. Storm's coming.")
    connection = connection_create(
        user=user, name="scripted", base_url=llm_server.url, model="scripted-model", api_key="sk-" + "x" * 20,
        is_default=True,
    )  # fmt: skip
    chat = chat_start(user=user, characters=[mira])
    message_append(chat=chat, data={"name": "Rowan", "is_user": True, "mes": HOSTILE})
    memory = memory_create(
        user=user, kind="fact", content="Mira keeps the ledger's spare key on a cord.", character=mira, importance=3,
        origin="manual",
    )  # fmt: skip
    entity = Entity.objects.create(user=user, character=mira, name="Corvin", type="person")
    persona = persona_create(user=user, name="Rowan", description="A courier who reads the tides.")
    api_token_create(user=user, name="SillyTavern on the desktop")
    instance_register(user=user, key="sillytavern-desktop", name="SillyTavern on the desktop")
    Backup.objects.create(user=user, kind="backup", trigger="manual", state="done", size=48213, counts={"chats": 1})
    ids = {
        "at": 1, "chat": chat.pk, "character": mira.pk, "connection": connection.pk, "memory": memory.pk,
        "entity": entity.pk, "persona": persona.pk,
    }  # fmt: skip
    with gunicorn(broker=broker, workers=1, asgi=True, pages=True, LOREKEEPER_PROVIDER_PRIVATE_HOSTS="true") as url:
        yield url.replace("127.0.0.1", "localhost"), ids
    connections.close_all()


def _console(page, message) -> None:
    """Errors and warnings, but the browser's own request for /favicon.ico (the admin's pages name no icon)."""
    if message.type in ("error", "warning") and not message.location.get("url", "").endswith("/favicon.ico"):
        page.console.append(f"{message.text} ({message.location.get('url')})")


def _watched(browser):
    page = browser.new_context(viewport={"width": 1100, "height": 900}).new_page()
    page.add_init_script(WATCH)
    page.console = []
    page.on("console", lambda message: _console(page, message))
    page.on("pageerror", lambda error: page.console.append(str(error)))
    return page


def _visit(page, base: str, name: str, path: str, *, status: int = 200) -> list[str]:
    """Open the page, let what it loads after itself arrive, and answer what is wrong with it."""
    page.console.clear()
    response = page.goto(f"{base}{path}")
    page.wait_for_load_state("networkidle")
    screenshot(page, name, FOLDER)
    problems = []
    if response is None or response.status != status:
        problems.append(f"answered {response and response.status}, not {status}")
    elif "script-src 'self'" not in (response.headers.get("content-security-policy") or ""):
        problems.append(f"policy {response.headers.get('content-security-policy')!r}")
    if violations := page.evaluate("window.__violations"):
        problems.append(f"violations: {violations}")
    # The browser reports a 404 answer itself in the console: that line is the page's own.
    if console := [line for line in page.console if not (status == 404 and "status of 404" in line)]:
        problems.append(f"console: {console}")
    return [f"{name} ({path}): {problem}" for problem in problems]


ADMIN = {
    "admin": "/admin/",
    "admin-chats": "/admin/chats/chat/",
    "admin-budgets": "/admin/llm/budget/",
    "admin-memories": "/admin/memories/memory/",
    "admin-users": "/admin/auth/user/",
}


def test_every_page_keeps_its_policy_without_a_violation(site, user, llm_server):
    from playwright.sync_api import expect

    base, ids = site
    llm_server.on("Tell me about the sea", Reply("The tide came in over the harbour wall. " * 8, tokens_per_second=40))
    problems = []
    with chromium() as browser:
        page = _watched(browser)
        for name, path in SIGNED_OUT.items():
            problems += _visit(page, base, name, path)
        problems += _visit(page, base, "404", "/no/such/page/", status=404)

        page.goto(f"{base}/accounts/login/")
        page.fill("input[name=username]", user.username)
        page.fill("input[name=password]", PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_load_state()
        pages = {**signed_in_pages(ids), **ADMIN, "api-docs": "/api/v1/docs/"}
        pages["admin-character"] = f"/admin/chats/character/{ids['character']}/change/"
        pages["admin-chat"] = f"/admin/chats/chat/{ids['chat']}/change/"  # its count of writes, read-only
        for name, path in pages.items():
            problems += _visit(page, base, name, path)

        # Swagger UI drew the API under the policy (its start-up script a file of its own).
        page.goto(f"{base}/api/v1/docs/")
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("Lorekeeper API")

        # A reply streamed from the model, on the chat page: the composer's scripts run under the policy.
        page.console.clear()
        page.goto(f"{base}/chats/{ids['chat']}/")
        page.fill("#composer-text", "Tell me about the sea.")
        page.press("#composer-text", "Enter")
        expect(page.locator("#m3 .text")).to_contain_text("harbour wall", timeout=30000)
        page.wait_for_load_state("networkidle")
        screenshot(page, "chat-streamed", FOLDER)
        if violations := page.evaluate("window.__violations"):
            problems.append(f"streamed reply: violations {violations}")
        if page.console:
            problems.append(f"streamed reply: console {page.console}")
    assert not problems, "\n".join(problems)


def test_markup_in_a_message_does_not_run_and_the_moved_handlers_work(site, user):
    base, ids = site
    with chromium() as browser:
        page = _watched(browser)
        page.goto(f"{base}/accounts/login/")
        page.fill("input[name=username]", user.username)
        page.fill("input[name=password]", PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_load_state()

        page.goto(f"{base}/chats/{ids['chat']}/")
        page.wait_for_load_state("networkidle")
        text = page.locator("#m1 .text")
        assert "the map" in text.inner_text()
        markup = text.inner_html()
        assert "onerror" not in markup and "<script" not in markup and "javascript:" not in markup, markup
        text.get_by_text("the map").click()
        # Past nh3: the page's own handlers and links refuse inline code (written into the page by the test, as a
        # cleaner's bug would let through).
        page.evaluate(
            """() => {
              const image = `<img src="data:image/png;base64,AAAA" onerror="window.__pwned = 'img'">`;
              document.body.insertAdjacentHTML('beforeend', image);
              const link = document.createElement('a');
              link.href = "javascript:window.__pwned = 'link'";
              link.id = 'planted';
              link.textContent = 'planted';
              document.body.append(link);
            }"""
        )
        page.locator("#planted").click()
        page.wait_for_timeout(500)
        assert page.evaluate("window.__pwned") is None
        violations = page.evaluate("window.__violations")
        assert any(v.startswith("script-src") for v in violations), violations

        # The recall card's write sends the chat's integrity from the page (an htmx:configRequest handler now).
        page.goto(f"{base}/chats/{ids['chat']}/")
        page.wait_for_load_state("networkidle")
        integrity = page.locator("#messages").get_attribute("data-integrity")
        with page.expect_request(lambda request: "/recall/" in request.url and request.method == "POST") as sent:
            page.locator("#recall-slot-1 .recall-make button").click()
        assert f"integrity={integrity}" in (sent.value.post_data or ""), sent.value.post_data

        page.console.clear()
        # A form that asks before it acts: dismissed, nothing is removed; the question comes from the page's script.
        asked = []
        page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        page.goto(f"{base}/llm/")
        page.get_by_role("button", name="Remove").click()
        page.wait_for_timeout(300)
        assert asked == ["Remove this connection?"]
        assert page.url.rstrip("/").endswith("/llm")
        assert page.evaluate("window.__violations") == []
        assert page.console == [], page.console
