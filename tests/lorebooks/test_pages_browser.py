"""The lorebooks pages and a reply's Prompt page in a real headless Chromium, at a desktop's and a phone's width, as a
person uses them: a World Info file chosen in the import form, an entry changed by typing into its form, and the
Prompt page of a reply listing the entries that fired and why. No page is wider than the screen, and none logs an
error. Screenshots in var/test-artifacts/lorebooks/."""

from __future__ import annotations

import json

import pytest

from apps.chats.models import Chat
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.generation.models import Generation
from apps.generation.services.generate import generation_prepare
from apps.generation.services.store import reply_store
from apps.lorebooks.models import Lorebook, LorebookEntry
from tests.browsers import screenshot, session_cookie, watched_page
from tests.chats.factories import CharacterFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

FOLDER = "lorebooks"
SAVED = {"selective": True, "useProbability": True, "probability": 100, "order": 100, "position": 0}
WORLD = {"entries": {
    "0": {**SAVED, "uid": 0, "key": ["gull", "Gull's"], "comment": "The Gull", "content": "The Gull is Hale's ship."},
    "1": {**SAVED, "uid": 1, "constant": True, "comment": "Night rule", "content": "The harbour closes at night."},
    "2": {**SAVED, "uid": 2, "key": ["/storms?/i"], "comment": "Storms", "position": 4, "depth": 1, "role": 0,
          "content": "Storms come from the west, and the bells ring twice."},
    **{str(n): {**SAVED, "uid": n, "key": [f"key{n}"], "comment": f"Entry {n}", "content": f"Lore {n}."}
       for n in range(4, 60)},
    # A text with no space to break at (a URL, a run of letters): the page no wider than the screen for it.
    "3": {**SAVED, "uid": 3, "key": ["y" * 120], "comment": "Long", "content": "x" * 300},
}}  # fmt: skip


def _fits(page, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width, "the page is wider than the screen"
    assert page.errors == []


@pytest.mark.parametrize("width", [1280, 390])
def test_a_person_imports_a_book_edits_an_entry_and_reads_why_it_fired(browser, live_server, client, user, llm,
                                                                      tmp_path, width):  # fmt: skip
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    path = tmp_path / "Harbour.json"
    path.write_text(json.dumps(WORLD))
    page.goto(f"{live_server.url}/lorebooks/")
    page.set_input_files("input[type=file][name=file]", str(path))
    page.get_by_role("button", name="Import", exact=True).click()
    page.wait_for_load_state()
    book = Lorebook.objects.get(user=user, name="Harbour")
    assert page.url.endswith(f"/lorebooks/{book.pk}/") and "The Gull" in page.content()
    _fits(page, width)
    screenshot(page, f"book-{width}", FOLDER)
    page.get_by_role("button", name="Use in every chat").click()
    page.wait_for_load_state()
    assert Lorebook.objects.get(pk=book.pk).scope == "global"

    page.get_by_role("link", name="The Gull").click()
    page.fill("textarea[name=content]", "The Gull is Hale's ship, back from the north.")
    page.fill("input[name=key]", "gull, Gull's, /the north/i")
    _fits(page, width)
    screenshot(page, f"entry-{width}", FOLDER)
    page.get_by_role("button", name="Save entry").click()
    page.wait_for_load_state()
    entry = LorebookEntry.objects.get(lorebook=book, uid=0).data
    assert entry["content"] == "The Gull is Hale's ship, back from the north."
    assert entry["key"] == ["gull", "Gull's", "/the north/i"]

    mira = CharacterFactory(user=user, name="Mira", description="Keeps the harbour lantern.")
    chat = chat_create(user=user, title="Harbour", character_ids=[mira.pk], user_name="Rowan")
    lines = [("Mira", "The lantern is lit."), ("Rowan", "Keep it lit."), ("Mira", "A storm is coming, I think.")]
    chat = chat_append(chat=chat, messages=[{"name": n, "is_user": n == "Rowan", "mes": t} for n, t in lines],
                       integrity=chat.integrity).chat  # fmt: skip
    prepared = generation_prepare(user=user, chat=chat, message="Did the Gull come in?")
    reply_store(generation=prepared.generation, text="At dawn.", state=Generation.State.DONE)
    page.goto(f"{live_server.url}/chats/{chat.pk}/messages/4/prompt/")
    lore = page.locator(".prompt-lore")
    text = lore.inner_text()
    assert "The Gull" in text and "key gull in the newest message" in text
    assert "Night rule" in text and "constant" in text
    assert "Storms" in text and "key /storms?/i in the message 1 before the newest" in text
    _fits(page, width)
    screenshot(page, f"prompt-{width}", FOLDER)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_person_finds_lorebook_entries_beside_memories_and_exports_memories(browser, live_server, client, user,
                                                                               width):  # fmt: skip
    from apps.lorebooks.services.books import lorebook_import
    from apps.memories.services.memories import memory_create

    page = watched_page(browser, width, live_server, session_cookie(client, user))
    book = lorebook_import(user=user, name="Harbour", data=WORLD)
    Lorebook.objects.filter(pk=book.pk).update(scope=Lorebook.Scope.GLOBAL)
    mira = CharacterFactory(user=user, name="Mira", description="Keeps the harbour lantern.")
    memory_create(user=user, character=mira, kind="fact", content="Hale sails the Gull to the north each spring.",
                  entities=[{"name": "Hale"}])  # fmt: skip
    page.goto(f"{live_server.url}/characters/{mira.pk}/memories/")
    page.locator("#memory-q").press_sequentially("Where does the Gull sail?")  # results come as a person types
    page.locator(".lore-hits .lorebook-entry").first.wait_for()
    assert "Hale sails the Gull" in page.locator("#memory-results").inner_text()
    hits = page.locator(".lore-hits").inner_text()
    assert "In your lorebooks" in hits and "The Gull is Hale's ship." in hits
    _fits(page, width)
    screenshot(page, f"memories-search-{width}", FOLDER)
    with page.expect_download() as download:
        page.get_by_role("link", name="Export as World Info").click()
    exported = json.loads(download.value.path().read_text())
    assert download.value.suggested_filename == "Mira memories.json"
    assert [entry["key"] for entry in exported["entries"].values()] == [["Hale"]]


@pytest.mark.parametrize("width", [1280, 390])
def test_a_person_changes_the_activation_settings(browser, live_server, client, user, width):
    from apps.lorebooks.services.settings import lore_settings_get

    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/lorebooks/")
    page.get_by_text("Activation settings").click()
    page.get_by_label("Scan depth (messages)").fill("6")
    page.get_by_label("Match whole words").uncheck()
    page.get_by_label("Insertion strategy").select_option(label="Global lore first")
    _fits(page, width)
    screenshot(page, f"settings-{width}", FOLDER)
    page.get_by_role("button", name="Save settings").click()
    page.wait_for_load_state()
    assert "World Info settings saved." in page.content()
    settings = lore_settings_get(user=user)
    assert (settings.depth, settings.match_whole_words, settings.character_strategy) == (6, False, 2)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_person_with_many_books_pages_through_them_and_finds_one_by_name(browser, live_server, client, user, width):
    from apps.lorebooks.services.books import lorebook_import

    small = {"entries": {"0": {**SAVED, "uid": 0, "key": ["gull"], "comment": "The Gull", "content": "A ship."}}}
    for n in range(40):
        lorebook_import(user=user, name=f"Harbour district {n:02}", data=small)
    lorebook_import(user=user, name="Mountain pass", data=small)
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/lorebooks/")
    rows = page.locator("#book-results tbody tr")
    assert rows.count() == 25 and page.get_by_text("Page 1 of 2").is_visible()
    _fits(page, width)
    screenshot(page, f"books-{width}", FOLDER)
    page.get_by_role("link", name="Next →").click()
    page.get_by_text("Page 2 of 2").wait_for()
    assert rows.count() == 16 and page.get_by_role("link", name="Mountain pass").is_visible()
    page.get_by_label("Search lorebooks").fill("mountain")
    page.get_by_text("Page 2 of 2").wait_for(state="detached")
    assert rows.count() == 1 and "q=mountain" in page.url
    screenshot(page, f"books-found-{width}", FOLDER)
    page.get_by_role("link", name="Mountain pass").click()
    page.wait_for_url(f"{live_server.url}/lorebooks/*/")
    assert page.get_by_text("The Gull").is_visible()
    _fits(page, width)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_person_imports_an_unreadable_file_then_one_over_an_edited_book(browser, live_server, client, user,
                                                                         tmp_path, width):  # fmt: skip
    """The import form as a person uses it: a file nested too deep for any book is refused with why (a server error
    before), and a file imported with "Replace" over a book edited here keeps the edited version, listed on the
    book's page."""
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    deep = tmp_path / "Deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    page.goto(f"{live_server.url}/lorebooks/")
    page.set_input_files("input[type=file][name=file]", str(deep))
    page.get_by_role("button", name="Import", exact=True).click()
    page.wait_for_load_state()
    assert "Nothing was imported. The file is not JSON a book can hold: nested too deeply." in page.content()
    assert not Lorebook.objects.filter(user=user).exists()
    _fits(page, width)
    screenshot(page, f"refused-file-{width}", FOLDER)

    first = tmp_path / "Harbour.json"
    first.write_text(json.dumps(WORLD))
    page.set_input_files("input[type=file][name=file]", str(first))
    page.get_by_role("button", name="Import", exact=True).click()
    page.wait_for_load_state()
    book = Lorebook.objects.get(user=user, name="Harbour")
    page.get_by_role("link", name="The Gull").click()
    page.fill("textarea[name=content]", "The Gull is Hale's ship, edited here.")
    page.get_by_role("button", name="Save").click()
    page.wait_for_load_state()

    page.goto(f"{live_server.url}/lorebooks/")
    second = tmp_path / "again" / "Harbour.json"
    second.parent.mkdir()
    second.write_text(json.dumps({"entries": {"0": {**WORLD["entries"]["0"], "content": "From the file."}}}))
    page.set_input_files("input[type=file][name=file]", str(second))
    page.get_by_label("Replace my book of the same name").check()
    page.get_by_role("button", name="Import", exact=True).click()
    page.wait_for_load_state()
    assert page.url.endswith(f"/lorebooks/{book.pk}/")
    assert LorebookEntry.objects.get(lorebook=book, uid=0).data["content"] == "From the file."
    page.locator("#revisions").scroll_into_view_if_needed()
    assert "Replaced by an imported file" in page.locator("#revisions").inner_text()
    _fits(page, width)
    screenshot(page, f"import-replaced-{width}", FOLDER)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_person_gets_back_an_edit_a_devices_sync_replaced(browser, live_server, client, api, user, width):
    """An entry edited on the page while a device was offline; the device's later push wins by last write wins,
    and the edit is an earlier version on the book's page, which the person restores."""
    uid = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
    book = {"entries": {"0": {**WORLD["entries"]["0"]}}}
    change = {"type": "lorebook", "op": "create", "uid": uid, "clock": {"laptop": 1}, "data": {
        "name": "Harbour", "scope": "linked", "book": book}}  # fmt: skip
    assert api.post("/api/v1/sync/push", {"instance": "laptop", "changes": [change]}, format="json").status_code == 200
    stored = Lorebook.objects.get(user=user, uid=uid)
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/lorebooks/{stored.pk}/")
    page.get_by_role("link", name="The Gull").click()
    page.fill("textarea[name=content]", "The Gull is Hale's ship, edited here.")
    page.get_by_role("button", name="Save").click()
    page.wait_for_load_state()

    later = {"entries": {"0": {**WORLD["entries"]["0"], "content": "The Gull, as the laptop had it."}}}
    change |= {"op": "update", "clock": {"laptop": 2}, "modified_at": "2099-01-01T00:00:00Z", "data": {"book": later}}
    assert api.post("/api/v1/sync/push", {"instance": "laptop", "changes": [change]}, format="json").status_code == 200
    page.goto(f"{live_server.url}/lorebooks/{stored.pk}/")
    revisions = page.locator("#revisions")
    revisions.scroll_into_view_if_needed()
    assert "Replaced by laptop's version (sync)" in revisions.inner_text()
    _fits(page, width)
    screenshot(page, f"sync-replaced-{width}", FOLDER)

    revisions.get_by_role("button", name="Restore").click()
    page.wait_for_load_state()
    assert LorebookEntry.objects.get(lorebook=stored, uid=0).data["content"] == "The Gull is Hale's ship, edited here."


@pytest.mark.parametrize("width", [1280, 390])
def test_a_person_links_a_book_to_a_chat_on_its_page(browser, live_server, client, user, llm, width):
    """The Lorebooks page says a chat uses the book it links: the chat page's Chat panel links it (it took editing
    the metadata's JSON by hand). What else the metadata holds stays, and the next reply scans the book."""
    from playwright.sync_api import expect

    from apps.lorebooks.services.books import lorebook_import

    lorebook_import(user=user, name="Harbour", data=WORLD)
    lorebook_import(user=user, name="Inland", data={"entries": {}})
    mira = CharacterFactory(user=user, name="Mira")
    chat = chat_create(user=user, title="Harbour", character_ids=[mira.pk], user_name="Rowan")
    Chat.objects.filter(pk=chat.pk).update(chat_metadata={"note_prompt": "Rain.", "timedWorldInfo": {"sticky": {}}})
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/chats/{chat.pk}/")
    panel = page.locator("details[data-panel=chat]")
    if panel.get_attribute("open") is None:
        panel.locator("summary").click()
    lore = page.get_by_label("Chat lore")
    expect(lore).to_have_value("")
    lore.select_option("Harbour")
    expect(page.locator(".chat-lore .saved")).to_have_text("Saved.")
    assert Chat.objects.get(pk=chat.pk).chat_metadata == {
        "note_prompt": "Rain.", "timedWorldInfo": {"sticky": {}}, "world_info": "Harbour"
    }  # fmt: skip
    _fits(page, width)
    screenshot(page, f"chat-lore-{width}", FOLDER)
    page.reload()
    if panel.get_attribute("open") is None:
        panel.locator("summary").click()
    expect(page.get_by_label("Chat lore")).to_have_value("Harbour")
    chat = Chat.objects.get(pk=chat.pk)
    prepared = generation_prepare(user=user, chat=chat, message="Did the Gull come in?")
    assert any("The Gull is Hale's ship." in line["content"] for line in prepared.generation.prompt)
    page.get_by_label("Chat lore").select_option("")
    expect(page.locator(".chat-lore .saved")).to_have_text("Saved.")
    assert "world_info" not in Chat.objects.get(pk=chat.pk).chat_metadata
