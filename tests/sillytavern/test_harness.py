"""The end-to-end harness itself: a real SillyTavern serves the extension, chats with the scripted model in Chromium
and saves the chat to disk; the page helpers drive swipes, edits, deletions, slash commands and group chats; the
SillyTavern page can call Lorekeeper across origins."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.llm_server import Reply
from tests.sillytavern.harness import (
    chat_file,
    delete_message,
    edit_message,
    live_chat,
    open_character,
    open_group,
    read_chat_file,
    run_command,
    send_message,
    swipe,
    wait_until,
)


@pytest.mark.django_db(transaction=True)
def test_sillytavern_serves_the_extension_and_saves_a_chat_with_the_scripted_model(
    st, st_open, llm_server, lorekeeper, st_extension_source
):
    llm_server.on("The harbour is quiet tonight.", "Mira smiles. The lamps are lit.")
    st.add_character("Mira", first_mes="Welcome back, traveller.")
    page = st_open(extension=lorekeeper.extension_settings(sync=False, inject=False))

    manifest = httpx.get(f"{st.url}/scripts/extensions/third-party/lorekeeper/manifest.json", trust_env=False)
    assert manifest.status_code == 200
    assert manifest.json()["js"] == "index.js"
    assert manifest.json() == json.loads((st_extension_source / "manifest.json").read_text())
    settings = page.evaluate("() => SillyTavern.getContext().extensionSettings.lorekeeper")
    assert settings["server_url"] == lorekeeper.url and settings["api_token"] == lorekeeper.token

    open_character(page, "Mira")
    chat = send_message(page, "The harbour is quiet tonight.")

    assert [m["mes"] for m in chat] == [
        "Welcome back, traveller.",
        "The harbour is quiet tonight.",
        "Mira smiles. The lamps are lit.",
    ]
    assert page.locator("#chat .last_mes .mes_text").inner_text().strip() == "Mira smiles. The lamps are lit."
    request = llm_server.requests[-1]
    assert request["path"] == "/v1/chat/completions" and request["body"]["stream"] is False
    assert "The harbour is quiet tonight." in request["prompt"] and "Welcome back, traveller." in request["prompt"]
    header, messages = read_chat_file(chat_file(st, page))
    assert header["chat_metadata"]["integrity"]
    assert [(m["is_user"], m["mes"]) for m in messages] == [
        (False, "Welcome back, traveller."),
        (True, "The harbour is quiet tonight."),
        (False, "Mira smiles. The lamps are lit."),
    ]

    # The page reaches Lorekeeper across origins with the token, as the extension will.
    answer = page.evaluate(
        """async ([url, token]) => {
            const response = await fetch(`${url}/api/v1/chats/`, { headers: { Authorization: `Bearer ${token}` } });
            return { status: response.status, body: await response.json() };
        }""",
        [lorekeeper.url, lorekeeper.token],
    )
    assert answer["status"] == 200


def test_page_helpers_swipe_edit_delete_hide_cut_and_chat_in_a_group(st, st_open, llm_server):
    answers = iter(f"Answer {n}." for n in range(1, 100))
    llm_server.on(lambda prompt: True, lambda prompt: Reply(next(answers)))
    st.add_character("Mira", first_mes="Hello.")
    st.add_character("Tobin")
    st.add_group("Crew", ["Mira.png", "Tobin.png"], activation_strategy=1)  # every member answers, in order
    page = st_open()

    open_character(page, "Mira")
    send_message(page, "One.")
    send_message(page, "Two.")
    assert [m["mes"] for m in live_chat(page)] == ["Hello.", "One.", "Answer 1.", "Two.", "Answer 2."]

    swiped = swipe(page)
    assert swiped["swipes"] == ["Answer 2.", "Answer 3."] and swiped["mes"] == "Answer 3."
    assert swipe(page, "left")["mes"] == "Answer 2."

    assert edit_message(page, 1, "One, edited.")["mes"] == "One, edited."
    delete_message(page, 2)
    assert [m["mes"] for m in live_chat(page)] == ["Hello.", "One, edited.", "Two.", "Answer 2."]

    run_command(page, "/hide 1")
    assert live_chat(page)[1]["is_system"] is True
    assert run_command(page, "/cut 2").strip() == "Two."
    assert [m["mes"] for m in live_chat(page)] == ["Hello.", "One, edited.", "Answer 2."]
    path = chat_file(st, page)
    wait_until(
        lambda: (
            [(m["mes"], m.get("is_system", False)) for m in read_chat_file(path)[1]]
            == [("Hello.", False), ("One, edited.", True), ("Answer 2.", False)]
        ),
        message="the chat file to hold the edited, hidden and cut chat",
    )

    open_group(page, "Crew")
    chat = send_message(page, "Both of you, listen.", replies=2, timeout=60)
    assert chat[-3]["mes"] == "Both of you, listen."
    assert {chat[-2]["name"], chat[-1]["name"]} == {"Mira", "Tobin"}
    header, messages = read_chat_file(chat_file(st, page))
    assert messages[-3]["mes"] == "Both of you, listen." and len(messages) == len(chat)
