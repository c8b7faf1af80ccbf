"""Writing a story on the chat page in a real headless Chromium against the production server (gunicorn with one
uvicorn worker, ASGI), the reply streamed from the scripted model over real HTTP: a new chat from a character, send
(the memory reaches the model, the recall card shows), watch the stream (the worker answers other requests
meanwhile), stop, regenerate, swipe back, continue, edit; and the page at a phone's width. Screenshots are kept in
var/test-artifacts/ (chat-1100.png, chat-390.png)."""

from __future__ import annotations

import json

import httpx
import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connections

from apps.accounts.services import api_token_create, settings_document_get
from apps.chats.models import Chat, Message
from apps.injection.services.settings import injection_settings_save
from apps.llm.models import Connection
from apps.llm.services import connection_create
from apps.memories.services.memories import memory_create
from tests.browsers import chromium, screenshot
from tests.chats.factories import CharacterFactory
from tests.llm_server import Reply
from tests.servers import gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

PASSWORD = "correct horse battery"  # the `user` fixture's
BISCUIT = "Biscuit the lurcher sleeps under the lighthouse stairs."
LONG = " ".join(f"wave{i}" for i in range(80))
SEA = "*Mira looks out at the water.*\n\n" + LONG  # Markdown, as roleplay replies are


@pytest.fixture
def site(monkeypatch, user, llm_server, broker):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # Hashed as the production settings check it (the tests' own hasher is a fast one they do not know).
    user.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    user.save(update_fields=["password"])
    mira = CharacterFactory(
        user=user, name="Mira", description="{{char}} keeps the lantern.",
        first_mes="Evening, {{user}}. Storm's coming.", card_data={"alternate_greetings": ["You again, {{user}}?"]},
    )  # fmt: skip
    # The long-term slot off: the fact is the turn's to recall (and so shows on a recall card).
    injection_settings_save(
        user=user, values={"slots": {"long": {"enabled": False}}}, integrity=settings_document_get(user=user).integrity
    )
    memory_create(user=user, kind="fact", content=BISCUIT, character=mira, importance=1)
    connection_create(
        user=user, name="scripted", base_url=llm_server.url, model="scripted-model", api_key="sk-" + "x" * 20
    )
    llm_server.on("Where does Biscuit sleep", "Under the stairs, where it is warm.")
    llm_server.on("Tell me about the sea", Reply(SEA, tokens_per_second=15))
    with gunicorn(broker=broker, workers=1, asgi=True, pages=True, LOREKEEPER_PROVIDER_PRIVATE_HOSTS="true") as url:
        # localhost, not 127.0.0.1: the production settings' Secure cookies are kept for it over plain HTTP.
        yield url.replace("127.0.0.1", "localhost"), mira


def sign_in(page, base: str, user) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()
    assert "/accounts/login/" not in page.url, page.content()[:3000]


def send(page, text: str) -> None:
    from playwright.sync_api import expect

    # As a person does: the next message once Send is back (it gives way to Stop while a reply is written).
    expect(page.locator("#composer .send")).to_be_visible()
    page.fill("#composer-text", text)
    page.press("#composer-text", "Enter")


def new_chat(page, base: str, user, character) -> Chat:
    """Signed in, a new chat with `character` started as a person starts one: its page's New chat button."""
    sign_in(page, base, user)
    page.goto(f"{base}/characters/{character.pk}/")
    page.get_by_role("button", name="New chat").click()
    page.wait_for_url("**/chats/*/")
    return Chat.objects.get(user=user)


def test_a_story_is_written_streamed_stopped_regenerated_swiped_continued_and_edited(site, user, llm_server):
    from playwright.sync_api import expect

    base, mira = site
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1100, "height": 1300}).new_page()
        chat = new_chat(page, base, user, mira)
        expect(page.locator("#m0 .text")).to_contain_text("Evening, You. Storm's coming.")
        expect(page.locator("#m0")).to_contain_text("swipe 1 of 2")
        expect(page.locator("#composer-text")).to_be_visible()

        # Send: the person's message, its recall card, and the streamed reply, stored.
        send(page, "Where does Biscuit sleep?")
        expect(page.locator("#m1 .text")).to_contain_text("Where does Biscuit sleep?")
        expect(page.locator("#m2 .text")).to_contain_text("Under the stairs, where it is warm.")
        asked = json.dumps(llm_server.requests[-1]["body"]["messages"])
        assert BISCUIT in asked and "Mira keeps the lantern." in asked
        expect(page.locator("#m1 details.recall-card")).to_have_count(1)
        expect(page.locator("#composer-text")).to_have_value("")
        # The new messages' times read as the page's others do, and "Go to message #" offers them.
        sent = [page.locator(f"#m{n} header time").inner_text() for n in (0, 1, 2)]
        expect(page.locator("#jump-at")).to_have_attribute("placeholder", "0–2")
        page.reload()
        assert [page.locator(f"#m{n} header time").inner_text() for n in (0, 1, 2)] == sent

        # A long reply streams in; Stop keeps what arrived.
        send(page, "Tell me about the sea.")
        streaming = page.locator("article.message.streaming .text")
        expect(streaming).to_contain_text("wave5")
        # As it streams, the reply reads as it will once stored: its speaker named, its Markdown rendered.
        expect(page.locator("article.message.streaming .name")).to_have_text("Mira")
        expect(streaming.locator("em")).to_have_text("Mira looks out at the water.")
        expect(streaming).not_to_contain_text("*")
        # The server's only worker is streaming that reply: it answers another request meanwhile (ASGI).
        token = api_token_create(user=user, name="meanwhile")[1]
        meanwhile = httpx.get(f"{base}/api/v1/chats/", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert meanwhile.status_code == 200 and meanwhile.json()["results"][0]["id"] == chat.pk
        expect(streaming).not_to_contain_text("wave79")  # still streaming when that answer came
        page.locator("#composer .stop").click()
        expect(page.locator("#m4 .reply-state")).to_have_text("stopped")
        expect(page.locator("article.message:not([id])")).to_have_count(0)  # the stream's own article gave way to #m4
        stopped = Message.objects.get(chat=chat, index=4)
        assert stopped.mes.startswith("*Mira looks out at the water.*\n\nwave0 wave1") and stopped.mes != SEA

        # Regenerate: a second swipe of the reply; then back to the first.
        llm_server.on("Tell me about the sea", "The sea is grey tonight.")
        page.locator("#m4 .message-menu > summary").click()  # one menu per message holds its tools
        page.locator("#m4 .regenerate").click()
        expect(page.locator("#m4 .text")).to_contain_text("The sea is grey tonight.")
        expect(page.locator("#m4")).to_contain_text("swipe 2 of 2")
        page.locator("#m4 .swipe-prev").click()
        expect(page.locator("#m4")).to_contain_text("swipe 1 of 2")
        page.locator("#m4 .swipe-next").click()
        expect(page.locator("#m4 .text")).to_contain_text("The sea is grey tonight.")

        # Continue the last reply.
        llm_server.on("Continue your last message", " And the kettle is on.")
        page.locator("#composer .continue").click()
        expect(page.locator("#m4 .text")).to_contain_text("The sea is grey tonight. And the kettle is on.")

        # A reply past the length the connection asks for is stopped there: the person is told why.
        Connection.objects.filter(user=user).update(reply_tokens=20)
        llm_server.on("Tell me a long tale", LONG)
        send(page, "Tell me a long tale.")
        expect(page.locator("#m6 .reply-state")).to_have_text("stopped")
        expect(page.locator("#composer .composer-status")).to_have_text(
            "Stopped: the reply reached its length of 20 tokens. What arrived is kept."
        )
        assert Message.objects.get(chat=chat, index=6).mes.startswith("wave0 wave1")
        assert "wave79" not in Message.objects.get(chat=chat, index=6).mes
        screenshot(page, "chat-stopped-by-a-bound-1100")

        # Edit a message through the page's editor.
        page.locator("#m1 .message-menu > summary").click()
        page.locator("#m1 .edit-message").click()
        page.locator("#m1 .edit-form textarea").fill("Where does Biscuit sleep at night?")
        page.locator("#m1 .edit-form button[type=submit]").click()
        expect(page.locator("#m1 .text")).to_contain_text("at night")
        assert Message.objects.get(chat=chat, index=1).mes == "Where does Biscuit sleep at night?"

        # The prompt of the reply, shown after the fact.
        page.locator("#m2 .message-menu > summary").click()
        page.locator("#m2").get_by_role("link", name="Prompt").click()
        expect(page.locator(".prompt-lines")).to_contain_text("Where does Biscuit sleep?")
        screenshot(page, "chat-1100")

        phone = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
        sign_in(phone, base, user)
        phone.goto(f"{base}/chats/{chat.pk}/")
        expect(phone.locator("#composer-text")).to_be_visible()
        screenshot(phone, "chat-390")
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        # The test's ORM calls ran under Playwright's greenlet, whose context holds a connection of its own:
        # closed here, or the test database could not be dropped at the end.
        connections.close_all()


def test_a_reply_lorekeeper_failed_says_lorekeeper_failed_not_the_model(site, user):
    """A reply that failed by a fault of Lorekeeper's own (stop reason `server`, or `lease` when its process died)
    is not put on the person's model. The server's answer is the one generation_events gives such a reply (its
    `error` event, reason `server`); the model's own failure still reads "The model failed"."""
    from playwright.sync_api import expect

    from apps.generation.services.stream import INTERNAL_ERROR

    base, mira = site
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        chat = new_chat(page, base, user, mira)
        expect(page.locator("#composer-text")).to_be_visible()

        def answer(reason: str):
            ended = {"generation": "0" * 32, "state": "failed", "mode": "new", "text": "", "index": None,
                     "swipe_id": None, "message": None, "integrity": str(chat.integrity), "reason": reason,
                     "detail": INTERNAL_ERROR if reason else "Model endpoint refused the request (401)"}  # fmt: skip
            body = f"event: error\ndata: {json.dumps(ended)}\n\n"
            return lambda route: route.fulfill(status=200, content_type="text/event-stream", body=body)

        notice = page.locator(".sync-notice-text")
        page.route("**/generate", answer("server"))
        send(page, "Any ships?")
        expect(notice).to_have_text(f"Lorekeeper failed: {INTERNAL_ERROR}")
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            screenshot(page, f"chat-lorekeeper-failed-{width}", "chat-notices")
        page.unroute("**/generate")
        page.route("**/generate", answer(""))
        send(page, "Any ships at all?")
        expect(notice).to_have_text("The model failed: Model endpoint refused the request (401)")
        # A message refused before it was sent stays in the box: the notice says why in a line, without a second
        # copy of the message (on a phone that copy, sticky at the top, covered the chat).
        page.unroute("**/generate")
        refused = {"message": "Choose who replies.", "extra": {"field": "character"}}
        page.route("**/generate", lambda route: route.fulfill(status=400, json=refused))
        send(page, "Who is there?")
        expect(notice).to_have_text("Not sent: Choose who replies.")
        expect(page.locator(".sync-pending")).to_be_hidden()
        assert page.input_value("#composer-text") == "Who is there?"
        screenshot(page, "chat-not-sent-390", "chat-notices")


def test_the_model_a_person_chooses_for_a_chat_stays_chosen(site, user, llm_server):
    """A person's first connection does not answer (a wrong port), the second does; neither is ticked for memory
    work. The Models page marks which one replies; the person chooses the other under the composer's Options, and
    after a reload the chat still offers it (it went back to the first, so the next reply failed after 10 s)."""
    from playwright.sync_api import expect

    base, mira = site
    Connection.objects.filter(user=user).update(created_at="2026-01-02T00:00:00Z")
    dead = connection_create(user=user, name="deadport", base_url="http://127.0.0.1:9/v1", model="gone",
                             api_key="sk-" + "y" * 20)  # fmt: skip
    Connection.objects.filter(pk=dead.pk).update(created_at="2026-01-01T00:00:00Z")  # added first
    scripted = Connection.objects.get(user=user, name="scripted")
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        sign_in(page, base, user)
        page.goto(f"{base}/llm/")
        expect(page.locator(f"#connection-{dead.pk}")).to_contain_text("replies")
        expect(page.locator(f"#connection-{scripted.pk} .badge", has_text="replies")).to_have_count(0)
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            screenshot(page, f"models-replies-{width}", "models")
        page.set_viewport_size({"width": 1280, "height": 900})
        chat = new_chat(page, base, user, mira)
        model = page.locator("#composer select[name=connection]")
        expect(model).to_have_value(str(dead.pk))
        page.locator("#composer .composer-more summary").click()
        model.select_option(str(scripted.pk))
        send(page, "Where does Biscuit sleep?")
        expect(page.locator("#m2 .text")).to_contain_text("Under the stairs, where it is warm.")
        page.reload()
        expect(model).to_have_value(str(scripted.pk))
        send(page, "Where does Biscuit sleep now?")
        expect(page.locator("#m4 .text")).to_contain_text("Under the stairs, where it is warm.")
        assert list(chat.generations.order_by("pk").values_list("connection_id", flat=True)) == [scripted.pk] * 2
        connections.close_all()
