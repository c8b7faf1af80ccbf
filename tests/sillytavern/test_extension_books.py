"""The extension sends the World Info books the open chat uses to Lorekeeper (docs/LOREBOOKS.md, "From SillyTavern"),
in a real SillyTavern 1.19.0 in Chromium: the book active in every chat arrives global, the character's book
arrives and is linked to the character, an entry a person edits in SillyTavern's World Info panel arrives edited,
and a book taken off SillyTavern's global list is taken off Lorekeeper's (and put back); an entry edited in
Lorekeeper's form stays when SillyTavern is reloaded, and is kept as an earlier version, and restored, when the
entry is then edited in SillyTavern; a book a person picks
among the character's Additional Lorebooks arrives and is scanned with the character's own, and leaves it when
taken off; in a group chat each member's book is linked to that member. Lorekeeper's own prompt for the chat then
activates them."""

from __future__ import annotations

import json

import pytest

from apps.chats.models import Chat
from apps.lorebooks.models import Lorebook, LorebookEntry, LorebookRevision
from apps.lorebooks.services.lore import chat_books
from tests.browsers import ARTIFACTS
from tests.sillytavern.harness import open_character, open_group, reload, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 45.0  # a ceiling, reached only on a loaded machine


def _world(content: str, key: str) -> dict:
    return {"entries": {"0": {"uid": 0, "key": [key], "content": content, "comment": key, "position": 0,
                              "selective": True, "constant": False, "order": 100, "disable": False}}}  # fmt: skip


def test_the_books_of_the_open_chat_reach_lorekeeper_and_an_edit_follows(st, st_open, lorekeeper):
    worlds = st.user_dir / "worlds"
    worlds.mkdir(parents=True, exist_ok=True)
    (worlds / "World.json").write_text(json.dumps(_world("The harbour closes at night.", "harbour")))
    (worlds / "Mira lore.json").write_text(json.dumps(_world("Mira keeps the lantern.", "lantern")))
    extensions = {"talkativeness": "0.5", "fav": False, "world": "Mira lore", "depth_prompt": {}}  # the card's link
    st.add_character("Mira", first_mes="The lantern is lit.", chat="Mira - books", extensions=extensions)

    def active_world(data: dict) -> None:
        data["world_info_settings"]["world_info"] = {"globalSelect": ["World"]}

    page = st_open(extension=lorekeeper.extension_settings(inject=False), settings=active_world)
    open_character(page, "Mira")
    user = lorekeeper.user
    wait_until(lambda: Lorebook.objects.filter(user=user, name__in=["World", "Mira lore"]).count() == 2,
               timeout=TIMEOUT, message="the chat's books did not reach Lorekeeper")  # fmt: skip
    assert Lorebook.objects.get(user=user, name="World").scope == "global"
    chat = Chat.objects.get(user=user)
    mira = chat.characters.get()
    assert mira.card_data["extensions"]["world"] == "Mira lore"
    books, _ = chat_books(user=user, chat=chat, character=mira)
    assert sorted((book.name, book.kind) for book in books) == [("Mira lore", "character"), ("World", "global")]

    # A person edits the World entry in SillyTavern's World Info panel.
    page.click("#WIDrawerIcon")
    page.select_option("#world_editor_select", label="World")
    entry = page.locator("#world_popup_entries_list .world_entry").first
    entry.locator(".inline-drawer-toggle").first.click()
    entry.locator('textarea[name="content"]').fill("The harbour closes at dusk now.")
    wait_until(
        lambda: LorebookEntry.objects.get(lorebook__user=user, lorebook__name="World", uid=0).data["content"]
        == "The harbour closes at dusk now.",
        timeout=TIMEOUT, message="the edit did not reach Lorekeeper",
    )  # fmt: skip

    # The person takes World off the books active in every chat: the × on its chip in SillyTavern's list.
    page.locator("#world_info + .select2 .select2-selection__choice", has_text="World").locator(
        ".select2-selection__choice__remove"
    ).click()
    wait_until(lambda: Lorebook.objects.get(user=user, name="World").scope == "linked",
               timeout=TIMEOUT, message="World stayed global in Lorekeeper")  # fmt: skip
    books, _ = chat_books(user=user, chat=chat, character=mira)
    assert [(book.name, book.kind) for book in books] == [("Mira lore", "character")]
    (ARTIFACTS / "lorebooks").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "lorebooks" / "sillytavern-world-off-the-global-list.png"))
    # And back on the list: global again.
    page.keyboard.press("Escape")  # the list select2 opened as the chip went
    page.locator("#world_info + .select2 .select2-selection").click()
    page.locator(".select2-container--open .select2-results__option", has_text="World").click()
    wait_until(lambda: Lorebook.objects.get(user=user, name="World").scope == "global",
               timeout=TIMEOUT, message="World did not become global again")  # fmt: skip


def test_an_entry_edited_in_lorekeeper_outlives_a_reload_and_is_kept_when_sillytavern_changes_it(
    st, st_open, st_browser, lorekeeper
):
    worlds = st.user_dir / "worlds"
    worlds.mkdir(parents=True, exist_ok=True)
    (worlds / "World.json").write_text(json.dumps(_world("The harbour closes at night.", "harbour")))
    st.add_character("Mira", first_mes="The lantern is lit.", chat="Mira - edits")

    def active_world(data: dict) -> None:
        data["world_info_settings"]["world_info"] = {"globalSelect": ["World"]}

    page = st_open(extension=lorekeeper.extension_settings(inject=False), settings=active_world)
    open_character(page, "Mira")
    user = lorekeeper.user

    def content() -> str:
        return LorebookEntry.objects.get(lorebook__user=user, lorebook__name="World", uid=0).data["content"]

    wait_until(lambda: Lorebook.objects.filter(user=user, name="World").exists(),
               timeout=TIMEOUT, message="World did not reach Lorekeeper")  # fmt: skip
    book = Lorebook.objects.get(user=user, name="World")

    # The person corrects the entry in Lorekeeper's own entry form, in the browser.
    web = st_browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    web.goto(f"{lorekeeper.url}/accounts/login/")
    web.fill("input[name=username]", user.username)
    web.fill("input[name=password]", "correct horse battery")
    web.get_by_role("button", name="Sign in").click()
    web.wait_for_url(lambda url: "/accounts/login/" not in url)
    web.goto(f"{lorekeeper.url}/lorebooks/{book.pk}/entries/0/")
    web.fill('textarea[name="content"]', "The harbour closes at night; Mira has the key.")
    web.get_by_role("button", name="Save entry").click()
    web.wait_for_url(f"**/lorebooks/{book.pk}/")
    assert content() == "The harbour closes at night; Mira has the key."

    # SillyTavern is reloaded and the chat opened again: the extension sends its (unchanged) copy once more.
    with page.expect_response(lambda r: r.url.endswith("/lorebooks") and r.request.method == "POST") as sent:
        reload(page)
        open_character(page, "Mira")
    assert sent.value.status == 200
    assert content() == "The harbour closes at night; Mira has the key."  # Lorekeeper's edit stays

    # Then the person edits the same entry in SillyTavern's World Info panel: SillyTavern's copy comes over it, and
    # Lorekeeper's version is kept as an earlier one, restorable on the book's page.
    page.click("#WIDrawerIcon")
    page.select_option("#world_editor_select", label="World")
    entry = page.locator("#world_popup_entries_list .world_entry").first
    entry.locator(".inline-drawer-toggle").first.click()
    entry.locator('textarea[name="content"]').fill("The harbour never closes.")
    wait_until(lambda: content() == "The harbour never closes.", timeout=TIMEOUT,
               message="SillyTavern's edit did not reach Lorekeeper")  # fmt: skip
    kept = LorebookRevision.objects.get(lorebook=book)
    assert kept.data["entries"]["0"]["content"] == "The harbour closes at night; Mira has the key."
    web.goto(f"{lorekeeper.url}/lorebooks/{book.pk}/")
    (ARTIFACTS / "lorebooks").mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        web.set_viewport_size({"width": width, "height": 900})
        web.locator("#revisions").scroll_into_view_if_needed()
        web.screenshot(path=str(ARTIFACTS / "lorebooks" / f"earlier-versions-{width}.png"), full_page=True)
    web.get_by_role("button", name=f"Restore the version of {kept.created_at:%Y-%m-%d %H:%M}").click()
    web.wait_for_load_state()
    assert "Restored." in web.content()
    assert content() == "The harbour closes at night; Mira has the key."
    web.context.close()


def test_each_member_of_a_group_gets_its_own_book(st, st_open, lorekeeper):
    worlds = st.user_dir / "worlds"
    worlds.mkdir(parents=True, exist_ok=True)
    (worlds / "Mira lore.json").write_text(json.dumps(_world("Mira keeps the lantern.", "lantern")))
    (worlds / "Tobin lore.json").write_text(json.dumps(_world("Tobin mends the nets.", "nets")))
    link = {"talkativeness": "0.5", "fav": False, "depth_prompt": {}}
    mira = st.add_character("Mira", first_mes="Hello.", extensions={**link, "world": "Mira lore"})
    tobin = st.add_character("Tobin", first_mes="Hi.", extensions={**link, "world": "Tobin lore"})
    st.add_group("Harbour", [mira, tobin], activation_strategy=1)
    page = st_open(extension=lorekeeper.extension_settings(inject=False))
    open_group(page, "Harbour")
    user = lorekeeper.user

    def linked() -> dict:
        chat = Chat.objects.filter(user=user).first()
        if chat is None:
            return {}
        return {c.name: (c.card_data.get("extensions") or {}).get("world") for c in chat.characters.all()}

    wait_until(lambda: linked() == {"Mira": "Mira lore", "Tobin": "Tobin lore"},
               timeout=TIMEOUT, message="the members' books were not linked to them")  # fmt: skip
    chat = Chat.objects.get(user=user)
    for member in chat.characters.all():
        books, _ = chat_books(user=user, chat=chat, character=member)
        assert [(book.name, book.kind) for book in books] == [(f"{member.name} lore", "character")]


def test_a_characters_additional_lorebooks_picked_in_sillytavern_are_scanned_in_lorekeeper(st, st_open, lorekeeper):
    worlds = st.user_dir / "worlds"
    worlds.mkdir(parents=True, exist_ok=True)
    (worlds / "Mira lore.json").write_text(json.dumps(_world("Mira keeps the lantern.", "lantern")))
    (worlds / "Harbour.json").write_text(json.dumps(_world("The harbour closes at night.", "harbour")))
    extensions = {"talkativeness": "0.5", "fav": False, "world": "Mira lore", "depth_prompt": {}}
    st.add_character("Mira", first_mes="The lantern is lit.", chat="Mira - extra books", extensions=extensions)
    page = st_open(extension=lorekeeper.extension_settings(inject=False))
    open_character(page, "Mira")
    user = lorekeeper.user
    wait_until(lambda: Lorebook.objects.filter(user=user, name="Mira lore").exists(),
               timeout=TIMEOUT, message="the character's book did not reach Lorekeeper")  # fmt: skip

    def scanned() -> list:
        chat = Chat.objects.get(user=user)
        return [
            (book.name, book.kind) for book in chat_books(user=user, chat=chat, character=chat.characters.get())[0]
        ]

    # A person opens the character's "Link to World Info" and picks Harbour among its Additional Lorebooks.
    if not page.locator("#char-management-dropdown").is_visible():
        page.click("#rightNavDrawerIcon")
    page.select_option("#char-management-dropdown", label="Link to World Info")
    popup = page.locator("dialog.popup[open]")
    popup.locator(".character_extra_world_info_selector + .select2 .select2-selection").click()
    page.locator(".select2-container--open .select2-results__option", has_text="Harbour").click()
    popup.get_by_role("heading", name="Additional Lorebooks").click()  # the list closes (Escape would close the popup)
    wait_until(lambda: scanned() == [("Mira lore", "character"), ("Harbour", "character")],
               timeout=TIMEOUT, message="the additional book was not scanned in Lorekeeper")  # fmt: skip
    assert Chat.objects.get(user=user).characters.get().extra_books == ["Harbour"]
    (ARTIFACTS / "lorebooks").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "lorebooks" / "sillytavern-additional-lorebooks.png"))

    # And takes it off again: the × on its chip.
    popup.locator(".select2-selection__choice", has_text="Harbour").locator(
        ".select2-selection__choice__remove"
    ).click()
    wait_until(lambda: scanned() == [("Mira lore", "character")],
               timeout=TIMEOUT, message="the additional book stayed in Lorekeeper")  # fmt: skip
    assert Lorebook.objects.filter(user=user, name="Harbour").exists()  # the book itself stays
