"""A message hidden from the model, shown again and deleted alone on the chat page, in a real headless Chromium at a
desktop's and a phone's width, as a person does it: the message's menu, its buttons, the confirmation. Through the
same JSON Patch every client sends. Screenshots in var/test-artifacts/ (chat-hidden-<width>.png)."""

from __future__ import annotations

import json

import pytest

from apps.chats.models import Message
from apps.chats.services.chats import chat_import
from tests.browsers import screenshot, session_cookie, watched_page
from tests.chats.helpers import stream

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def _story(user):
    lines = [{"name": "Mira" if n % 2 else "You", "is_user": not n % 2, "mes": f"Line {n} of the harbour."}
             for n in range(6)]  # fmt: skip
    lines[3] |= {"swipes": ["Line 3 of the harbour.", "Line 3, told otherwise."], "swipe_id": 0}
    data = "\n".join(json.dumps(line) for line in [{"chat_metadata": {}}, *lines]).encode()
    return chat_import(user=user, stream=stream(data), title="Harbour")


def _menu(page, index: int, button: str) -> None:
    page.locator(f"#m{index} .message-menu > summary").click()
    page.locator(f"#m{index}").get_by_role("button", name=button).click()


def _stored(chat) -> list[tuple[str, bool]]:
    return list(Message.objects.filter(chat=chat).order_by("index").values_list("mes", "is_system"))


@pytest.mark.parametrize("width", [1280, 390])
def test_a_message_hidden_shown_again_and_deleted_alone_from_its_menu(browser, live_server, client, user, width):
    chat = _story(user)
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/chats/{chat.pk}/")

    _menu(page, 2, "Hide from the model")
    page.locator("#m2 .hidden-mark").wait_for()
    assert _stored(chat)[2] == ("Line 2 of the harbour.", True)
    page.locator("#m2 .message-menu > summary").click()
    assert page.locator("#m2").get_by_role("button", name="Show to the model").is_visible()
    screenshot(page, f"chat-hidden-{width}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.locator("#m2").get_by_role("button", name="Show to the model").click()
    page.locator("#m2 .hidden-mark").wait_for(state="detached")
    assert _stored(chat)[2] == ("Line 2 of the harbour.", False)

    page.on("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():  # the page is shown again, numbered as the chat now is
        _menu(page, 2, "Delete this message")
    page.locator("#m4").wait_for()
    assert [mes for mes, _ in _stored(chat)] == [f"Line {n} of the harbour." for n in (0, 1, 3, 4, 5)]
    assert Message.objects.get(chat=chat, index=2).swipes == ["Line 3 of the harbour.", "Line 3, told otherwise."]
    assert page.locator("#m2 .text").inner_text() == "Line 3 of the harbour."
    assert page.locator("#message-count").inner_text() == "5 messages"
    assert page.errors == []
    page.context.close()
