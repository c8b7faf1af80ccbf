"""The extension in a real SillyTavern 1.19 and Chromium, against Lorekeeper on the live server: live sync, memory
reaching the model, recall cards, groups, an outage and a second browser writing the same chat."""

from __future__ import annotations

import json
import re
import time

import pytest

from apps.accounts.services import settings_document_get
from apps.chats.models import Character, Chat
from apps.chats.services.chats import chat_export_lines
from apps.chats.services.writes import chat_append
from apps.injection.services.recall import recall_stored
from apps.injection.services.settings import injection_settings_save
from apps.memories.services.memories import memory_create
from tests.sillytavern.harness import (
    Relay,
    chat_file,
    delete_message,
    edit_message,
    live_chat,
    move_message,
    open_character,
    open_group,
    read_chat_file,
    run_command,
    send_message,
    start_edit,
    swipe,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)

SYNC_TIMEOUT = 45.0  # a ceiling, reached only on a loaded machine


def lorekeeper_lines(user) -> list:
    """The user's one Lorekeeper chat, exported for SillyTavern, as JSON values."""
    chat = Chat.objects.filter(user=user).first()
    if chat is None:
        return []
    return [json.loads(line) for line in b"".join(chat_export_lines(chat=chat, for_sillytavern=True)).split(b"\n")]


def file_lines(st, page) -> list:
    header, messages = read_chat_file(chat_file(st, page))
    return [header, *messages] if header else messages


def save(page) -> None:
    """SillyTavern's own save of the open chat (what it does after any change of its own)."""
    page.evaluate("() => SillyTavern.getContext().saveChat()")


def open_panel(page) -> None:
    """The extension's panel, as a person opens it: the Extensions drawer, then Lorekeeper's section."""
    if not page.locator("#lorekeeper_status").is_visible():
        page.locator("#extensions-settings-button .drawer-toggle").click()
        page.locator(".lorekeeper-settings .inline-drawer-toggle").click()
    page.locator("#lorekeeper_status").wait_for(state="visible")


def status(page) -> str:
    return page.evaluate("() => document.getElementById('lorekeeper_status')?.dataset.state ?? ''")


def live_lines(page) -> list:
    """The open chat as SillyTavern would write it now (its header and its messages)."""
    return page.evaluate(
        """() => {
            const c = SillyTavern.getContext();
            const header = { chat_metadata: c.chatMetadata, user_name: 'unused', character_name: 'unused' };
            return JSON.parse(JSON.stringify([header, ...c.chat]));
        }"""
    )


def assert_mirrored(st, page, user, step: str) -> None:
    """Lorekeeper's export equals SillyTavern's chat file, as JSON values, once both have settled (and equals the
    chat SillyTavern holds: SillyTavern adds defaults in memory, such as a greeting's swipes, that reach its file at
    the next save, and the extension mirrors them as they come)."""

    def same():
        live, saved = live_lines(page), file_lines(st, page)
        if live != saved:
            save(page)  # SillyTavern changed its chat in memory after its last save (world info timers…)
            return False
        return status(page) == "synced" and lorekeeper_lines(user) == saved

    try:
        wait_until(same, timeout=SYNC_TIMEOUT, interval=0.3, message=f"after {step}: export equals the file")
    except AssertionError:
        theirs, ours = file_lines(st, page), lorekeeper_lines(user)
        print(f"state={page.evaluate('() => globalThis.lorekeeperState?.()')}")
        print(f"status={status(page)}\nfile ({len(theirs)}): {theirs}\nlorekeeper ({len(ours)}): {ours}")
        raise


def test_a_solo_chat_is_mirrored_through_send_swipe_edit_delete_hide_and_move(st, st_open, llm_server, lorekeeper):
    llm_server.default.content = "Mira nods."
    st.add_character("Mira", first_mes="Welcome back, traveller.")
    page = st_open(extension=lorekeeper.extension_settings(inject=False))
    open_character(page, "Mira")
    save(page)
    assert_mirrored(st, page, lorekeeper.user, "opening the chat")
    chat = Chat.objects.get(user=lorekeeper.user)
    assert chat.client_key.startswith("st:char:Mira.png:")

    send_message(page, "The harbour is quiet tonight.")
    assert_mirrored(st, page, lorekeeper.user, "a send")
    send_message(page, "Shall we walk to the lighthouse?")
    assert_mirrored(st, page, lorekeeper.user, "a second send")
    llm_server.default.content = "Mira shrugs instead."
    swipe(page)
    assert_mirrored(st, page, lorekeeper.user, "a swipe")
    edit_message(page, 1, "The harbour is very quiet tonight.")
    assert_mirrored(st, page, lorekeeper.user, "an edit")
    run_command(page, "/hide 2")
    assert live_chat(page)[2]["is_system"] is True
    assert_mirrored(st, page, lorekeeper.user, "/hide")
    move_message(page, 3, "up")
    assert_mirrored(st, page, lorekeeper.user, "a move")
    delete_message(page, 1)
    assert_mirrored(st, page, lorekeeper.user, "a delete")
    # One Lorekeeper chat all along, and the export kept SillyTavern's own integrity slug.
    assert Chat.objects.filter(user=lorekeeper.user).count() == 1
    assert lorekeeper_lines(lorekeeper.user)[0]["chat_metadata"]["integrity"] == file_lines(st, page)[0][
        "chat_metadata"
    ].get("integrity")


# A model writes memories from the chat, so a card or a message can put SillyTavern's macros in one: the extension
# keeps them inert but {{user}} and {{char}} (lib/prompts.js).
DOG = "{{user}} knows the lighthouse keeper's old dog, Biscuit.{{setvar::dog::1}}"
ASK = "Tell me about the lighthouse keeper's old dog."


def remember_dog(user) -> None:
    """Long-term memories more than the long-term slot holds; the one about the dog is minor, so only the turn's
    recall (searched with the pending message) brings it."""
    values = {"budgets": {"long": 60}, "force_macros": True}  # the tier slots go to the {{smartmemory-*}} macros
    injection_settings_save(user=user, values=values, integrity=settings_document_get(user=user).integrity)
    character = Character.objects.get(user=user, name="Mira")
    for name in ("Corvin", "Tessa", "Hale", "Brin"):
        content = f"{name} trades salt for copper in the harbour."
        memory_create(user=user, kind="fact", content=content, character=character, origin="extraction", importance=3)
    memory_create(user=user, kind="fact", content=DOG, character=character, origin="extraction", importance=1)


def test_a_memory_reaches_the_model_and_its_recall_card_is_edited_and_rerun(
    st,
    st_open,
    llm_server,
    lorekeeper,
    scripted,
):
    llm_server.default.content = "Mira smiles."
    st.add_character("Mira", first_mes="Welcome back.")
    page = st_open(extension=lorekeeper.extension_settings())
    open_character(page, "Mira")
    save(page)
    assert_mirrored(st, page, lorekeeper.user, "opening the chat")
    remember_dog(lorekeeper.user)

    chat = send_message(page, ASK)
    prompt = json.dumps(llm_server.requests[-1]["body"], ensure_ascii=False)
    assert "Biscuit" in prompt, "the memory reached the model's request"
    assert "{\u200b{setvar::dog::1}}" in prompt and "{{setvar" not in prompt, "the memory's macro reached it inert"
    assert "User knows the lighthouse keeper" in prompt, "{{user}} in a memory is still SillyTavern's"
    dog = page.evaluate("() => SillyTavern.getContext().chatMetadata.variables?.dog ?? null")
    assert dog is None, "a memory set none of the chat's variables"
    record = chat[1]["extra"]["bme_recall"]
    assert "Biscuit" in record["injectionText"], "the pending message found the memory"
    assert_mirrored(st, page, lorekeeper.user, "the recall")
    stored = recall_stored(Chat.objects.get(user=lorekeeper.user).messages.get(index=1))
    assert stored == record
    macro = page.evaluate("() => SillyTavern.getContext().substituteParams('{{smartmemory-long}}')")
    assert "trades salt for copper" in macro, "the macros give the tier slots"
    open_panel(page)
    page.locator("#lorekeeper_story_refresh").click()
    story = page.locator("#lorekeeper_story")
    wait_until(lambda: "Memories: 5" in story.inner_text(), message="the story panel counts the chat's memories")
    assert story.locator("a").get_attribute("href") == f"{lorekeeper.url}/chats/{Chat.objects.get().pk}/"
    page.locator("#extensions-settings-button .drawer-toggle").click()  # closed again: it covers the chat
    page.locator("#lorekeeper_status").wait_for(state="hidden")

    card = page.locator('#chat .mes[mesid="1"] .lorekeeper-recall')
    card.wait_for()
    card.locator("summary").first.click()
    card.locator(".lorekeeper-recall-graph summary").click()
    node = card.locator(".lorekeeper-node").first
    node.locator(".lorekeeper-node-label").click()
    assert node.locator(".lorekeeper-node-details").is_visible()

    card.locator(".lorekeeper-recall-edit").click()
    card.locator(".lorekeeper-recall-input").fill("Biscuit sleeps by the lamp room door.")
    card.locator(".lorekeeper-recall-save").click()
    page.wait_for_function(
        "() => SillyTavern.getContext().chat[1].extra.bme_recall?.manuallyEdited === true", timeout=15_000
    )
    assert_mirrored(st, page, lorekeeper.user, "editing the recall")
    kept = recall_stored(Chat.objects.get(user=lorekeeper.user).messages.get(index=1))
    assert kept["injectionText"] == "Biscuit sleeps by the lamp room door." and kept["manuallyEdited"] is True

    page.locator('#chat .mes[mesid="1"] .lorekeeper-recall .lorekeeper-recall-rerun').click()
    page.wait_for_function(
        "() => SillyTavern.getContext().chat[1].extra.bme_recall?.manuallyEdited === false", timeout=30_000
    )
    assert_mirrored(st, page, lorekeeper.user, "re-running the recall")
    rerun = recall_stored(Chat.objects.get(user=lorekeeper.user).messages.get(index=1))
    assert "Biscuit" in rerun["injectionText"] and rerun["manuallyEdited"] is False

    page.locator('#chat .mes[mesid="1"] .lorekeeper-recall .lorekeeper-recall-delete').click()
    page.wait_for_function("() => !SillyTavern.getContext().chat[1].extra.bme_recall", timeout=15_000)
    page.locator('#chat .mes[mesid="1"] .lorekeeper-recall').wait_for(state="detached")
    assert_mirrored(st, page, lorekeeper.user, "deleting the recall")
    assert recall_stored(Chat.objects.get(user=lorekeeper.user).messages.get(index=1)) is None


def test_a_group_chat_is_mirrored_and_each_member_gets_its_context(st, st_open, llm_server, lorekeeper):
    llm_server.default.content = "A reply."
    mira, tobin = st.add_character("Mira", first_mes="Hello."), st.add_character("Tobin", first_mes="Hi.")
    st.add_group("Harbour", [mira, tobin], activation_strategy=1)
    page = st_open(extension=lorekeeper.extension_settings())
    open_group(page, "Harbour")
    send_message(page, "Good evening, both of you.", replies=2)
    assert_mirrored(st, page, lorekeeper.user, "a group send")
    chat = Chat.objects.get(user=lorekeeper.user)
    assert chat.client_key.startswith("st:group:")
    assert {m["name"] for m in lorekeeper_lines(lorekeeper.user) if not m.get("is_user") and "mes" in m} >= {
        "Mira",
        "Tobin",
    }


def test_an_outage_still_gives_a_reply_and_everything_syncs_when_lorekeeper_is_back(
    st, st_open, llm_server, lorekeeper, live_server
):
    llm_server.default.content = "The tide turns."
    relay = Relay(int(live_server.url.rsplit(":", 1)[1]))
    st.add_character("Mira", first_mes="Welcome back.")
    page = st_open(extension=lorekeeper.extension_settings(server_url=relay.url, timeout_ms=3000))
    open_character(page, "Mira")
    save(page)
    assert_mirrored(st, page, lorekeeper.user, "opening the chat")

    relay.down()
    chat = send_message(page, "Is anyone at the lighthouse?")
    assert chat[-1]["mes"] == "The tide turns.", "the reply was generated without Lorekeeper"
    assert page.locator(".toast-warning", has_text="without memory").count() == 1
    prompts = "() => Object.entries(SillyTavern.getContext().extensionPrompts)"
    slots = [(key, prompt) for key, prompt in page.evaluate(prompts) if key.startswith("smart_memory_")]
    assert all(not prompt["value"] for _, prompt in slots), "the memory slots were cleared"
    send_message(page, "Then we go alone.")
    assert page.locator(".toast-warning", has_text="without memory").count() <= 1, "one notice, not one per reply"
    try:
        wait_until(lambda: status(page) == "offline", timeout=SYNC_TIMEOUT, message="the panel says offline")
    except AssertionError:
        print(f"state={page.evaluate('() => globalThis.lorekeeperState?.()')}")
        raise
    assert len(lorekeeper_lines(lorekeeper.user)) < len(file_lines(st, page))

    relay.up()
    assert_mirrored(st, page, lorekeeper.user, "Lorekeeper coming back")
    relay.down()


def opened_while_down(st, st_open, lorekeeper, live_server):
    """Mira's chat opened while Lorekeeper cannot be reached (a relay in front of it, down): the relay and the page."""
    relay = Relay(int(live_server.url.rsplit(":", 1)[1]))
    relay.down()
    st.add_character("Mira", first_mes="Welcome back.")
    page = st_open(extension=lorekeeper.extension_settings(server_url=relay.url, timeout_ms=3000))
    open_character(page, "Mira")
    return relay, page


def retry_wait(page) -> int | None:
    """The seconds the panel says the next try at linking is away, if it says so."""
    said = page.evaluate("() => document.getElementById('lorekeeper_status')?.textContent ?? ''")
    shown = re.search(r"Trying again in (\d+) s", said)
    return int(shown[1]) if shown else None


def test_a_chat_opened_while_lorekeeper_is_down_is_linked_when_it_is_back(st, st_open, lorekeeper, live_server):
    """Linking is tried again less often while Lorekeeper stays unreachable (5 s, then 10, 20… at most a minute, a
    fifth more at random), and the chat links at the next try once it answers."""
    relay, page = opened_while_down(st, st_open, lorekeeper, live_server)
    waits: list[int] = []

    def longer() -> bool:
        shown = retry_wait(page)
        if shown and (not waits or shown != waits[-1]):
            waits.append(shown)
        return len(waits) >= 2

    wait_until(longer, timeout=SYNC_TIMEOUT, interval=0.2, message="a longer wait each time")
    assert waits[1] > waits[0] >= 5, waits
    assert status(page) == "offline" and not Chat.objects.filter(user=lorekeeper.user).exists()
    relay.up()
    save(page)
    assert_mirrored(st, page, lorekeeper.user, "Lorekeeper coming back")
    relay.down()


def test_a_chat_waiting_to_be_linked_is_linked_when_the_network_comes_back(st, st_open, lorekeeper, live_server):
    """The browser going offline and online again (the network back) links the open chat at once, not at the end of
    its wait, which by then is 20 s or more."""
    relay, page = opened_while_down(st, st_open, lorekeeper, live_server)
    shown = {}

    def long_wait() -> bool:
        wait = retry_wait(page)
        if wait and wait >= 20:
            shown.update(seconds=wait, at=time.monotonic())
        return bool(shown)

    wait_until(long_wait, timeout=SYNC_TIMEOUT, interval=0.2, message="a wait of 20 s or more")
    relay.up()
    page.context.set_offline(True)
    page.context.set_offline(False)
    timer = shown["at"] + shown["seconds"] - 0.5  # the earliest the wait's own timer could link it
    wait_until(
        lambda: Chat.objects.filter(user=lorekeeper.user).exists(),
        timeout=max(0.0, timer - 3 - time.monotonic()),
        interval=0.2,
        message="linked when the network came back, before the wait ran out",
    )
    save(page)
    assert_mirrored(st, page, lorekeeper.user, "the network coming back")
    relay.down()


def test_a_chat_linked_while_a_message_is_being_edited_is_merged_once_the_edit_ends(
    st, st_open, lorekeeper, live_server
):
    """A browser that never synced this chat opens it while Lorekeeper, which holds more of it, cannot be reached;
    when it links, a message is open in SillyTavern's editor, under which the merged chat cannot be shown: it tries
    again until the editor closes."""
    relay = Relay(int(live_server.url.rsplit(":", 1)[1]))
    st.add_character("Mira", first_mes="Welcome back.")
    settings = lorekeeper.extension_settings(server_url=relay.url, timeout_ms=3000)
    first = st_open(extension=settings)
    open_character(first, "Mira")
    save(first)
    assert_mirrored(st, first, lorekeeper.user, "opening the chat")
    first.context.close()
    relay.down()
    chat = Chat.objects.get(user=lorekeeper.user)
    written = {"name": "You", "is_user": True, "is_system": False, "send_date": "", "mes": "Written elsewhere."}
    chat_append(chat=chat, messages=[written], integrity=chat.integrity)
    page = st_open(extension=settings)  # a browser of its own: nothing of this chat's sync saved in it
    open_character(page, "Mira")
    wait_until(lambda: status(page) == "offline", timeout=SYNC_TIMEOUT, message="the panel says offline")
    start_edit(page, 0)
    relay.up()
    page.wait_for_timeout(8000)  # the next try at linking (5 s on) meets the open editor
    assert [m["mes"] for m in live_chat(page)] == ["Welcome back."]
    page.locator('#chat .mes[mesid="0"] .mes_edit_cancel').click()
    save(page)
    assert_mirrored(st, page, lorekeeper.user, "the editor closed")
    assert [m["mes"] for m in live_chat(page)] == ["Welcome back.", "Written elsewhere."]
    relay.down()


def test_a_second_browser_writing_the_same_chat_loses_nothing(st, st_open, llm_server, lorekeeper):
    llm_server.default.content = "Noted."
    st.add_character("Mira", first_mes="Welcome back.")
    first = st_open(extension=lorekeeper.extension_settings(inject=False))
    open_character(first, "Mira")
    save(first)
    assert_mirrored(st, first, lorekeeper.user, "opening the chat")
    second = st_open(extension=lorekeeper.extension_settings(inject=False))
    open_character(second, "Mira")

    send_message(second, "Written in the second browser.")
    try:
        wait_until(lambda: len(lorekeeper_lines(lorekeeper.user)) == 4, timeout=SYNC_TIMEOUT, message="second synced")
    except AssertionError:
        for page in (first, second):
            print(f"state={page.evaluate('() => globalThis.lorekeeperState?.()')}")
            print("live:", [m.get("mes") for m in live_chat(page)])
        print("lorekeeper:", [m.get("mes") for m in lorekeeper_lines(lorekeeper.user)[1:]])
        raise
    # The first browser has not seen those messages; it writes on top of what it had.
    send_message(first, "Written in the first browser.")

    def merged():
        texts = [m.get("mes") for m in lorekeeper_lines(lorekeeper.user)[1:]]
        return texts.count("Written in the second browser.") == 1 and texts.count("Written in the first browser.") == 1

    wait_until(merged, timeout=SYNC_TIMEOUT, message="Lorekeeper holds both browsers' messages")
    assert_mirrored(st, first, lorekeeper.user, "the merge")
    texts = [m["mes"] for m in live_chat(first)]
    assert texts.index("Written in the second browser.") < texts.index("Written in the first browser.")
    assert len(texts) == 5


def test_switching_chats_keeps_each_lorekeeper_chat_its_own(st, st_open, llm_server, lorekeeper):
    llm_server.default.content = "A reply."
    st.add_character("Mira", first_mes="Welcome back.")
    st.add_character("Tobin", first_mes="Ahoy.")
    page = st_open(extension=lorekeeper.extension_settings(inject=False))
    open_character(page, "Mira")
    send_message(page, "Written to Mira.")
    wait_until(lambda: status(page) == "synced" and Chat.objects.filter(user=lorekeeper.user).count() == 1)
    mira_file = file_lines(st, page)
    open_character(page, "Tobin")
    send_message(page, "Written to Tobin.")
    save(page)

    def both():
        chats = {c.client_key.split(":")[2]: c for c in Chat.objects.filter(user=lorekeeper.user)}
        if set(chats) != {"Mira.png", "Tobin.png"} or status(page) != "synced":
            return False
        export = {key: exported(chat) for key, chat in chats.items()}
        return export["Mira.png"] == mira_file and export["Tobin.png"] == file_lines(st, page)

    wait_until(both, timeout=SYNC_TIMEOUT, message="each chat mirrored in its own Lorekeeper chat")


def exported(chat) -> list:
    return [json.loads(line) for line in b"".join(chat_export_lines(chat=chat, for_sillytavern=True)).split(b"\n")]
