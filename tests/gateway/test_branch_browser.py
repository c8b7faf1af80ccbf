"""Two conversations of a front end that begin alike, through the gateway on the live server, then the person's
chats page in Chromium: the second went on in a branch, and the first kept every message."""

from __future__ import annotations

import re

import httpx
import pytest

from apps.chats.models import Chat
from tests.browsers import screenshot, session_cookie, watched_page

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_conversation_sharing_a_storys_opening_is_a_branch_on_the_chats_page(
    browser, live_server, client, user, llm, token
):
    llm.server.default.content = "Hello! How can I help you today?"

    def ask(*texts: str) -> None:
        messages = [{"role": "user" if n % 2 == 0 else "assistant", "content": text} for n, text in enumerate(texts)]
        answer = httpx.post(
            f"{live_server.url}/v1/chat/completions", json={"model": "scripted", "messages": messages},
            headers={"Authorization": f"Bearer {token}"}, timeout=30,
        )  # fmt: skip
        assert answer.status_code == 200, answer.text

    hello = "Hello! How can I help you today?"
    ask("hi")
    ask("hi", hello, "Tell me about lighthouses.")
    ask("hi")  # a new conversation in the front end, begun the same way
    first, branch = Chat.objects.filter(user=user).order_by("pk")
    assert [m.mes for m in first.messages.order_by("index")] == ["hi", hello, "Tell me about lighthouses.", hello]
    assert [m.mes for m in branch.messages.order_by("index")] == ["hi", hello]
    assert re.search(r" \(branch at #\d+\)$", branch.title) and branch.client_key.startswith(first.client_key + "/")

    for width in (1280, 390):
        page = watched_page(browser, width, live_server, session_cookie(client, user))
        page.goto(f"{live_server.url}/chats/")
        screenshot(page, f"gateway-branch-chats-{width}", folder="gateway-branch")
        assert page.locator(f'a[href="/chats/{branch.pk}/"]').count() >= 1
        assert page.locator(f'a[href="/chats/{first.pk}/"]').count() >= 1
        assert page.errors == []
        page.context.close()
