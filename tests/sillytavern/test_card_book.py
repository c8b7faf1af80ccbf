"""A V2 card with an embedded lorebook round-trips: imported into Lorekeeper over HTTP, exported again as a PNG, and
imported into a real SillyTavern 1.19.0 by a person in Chromium (the character panel's import, then opening the
character and "Yes" to SillyTavern's offer to import the card's lorebook). SillyTavern then holds the card's book
unchanged, and the World Info it makes of it is, entry by entry, what Lorekeeper activates for that character
(docs/LOREBOOKS.md). Screenshots of the imported book in SillyTavern's World Info panel go to
var/test-artifacts/lorebooks/."""

from __future__ import annotations

import base64
import json
import re

import httpx
import pytest

from apps.chats.models import Character
from apps.chats.services.png import png_text_chunks
from apps.lorebooks.services.books import card_book_entries
from tests.browsers import ARTIFACTS
from tests.sillytavern import harness

pytestmark = pytest.mark.django_db(transaction=True)

BOOK = {
    "name": "Harbour Lore",
    "description": "The harbour and its people.",
    "scan_depth": 4,
    "token_budget": 600,
    "recursive_scanning": True,
    "extensions": {"made_by": "a card site"},
    "entries": [
        {"id": 0, "keys": ["gull", "Gull's"], "content": "The Gull is Hale's ship.", "enabled": True,
         "insertion_order": 50, "comment": "The Gull", "position": "before_char", "selective": False,
         "secondary_keys": [], "constant": False, "extensions": {}},
        {"id": 1, "keys": [], "content": "The harbour closes at night.", "enabled": True, "insertion_order": 10,
         "constant": True, "position": "after_char", "comment": "Night rule"},
        {"id": 2, "keys": ["/storms?/i"], "content": "Storms come from the west.", "enabled": True,
         "insertion_order": 100, "position": "after_char",
         "extensions": {"position": 4, "depth": 1, "role": 1, "probability": 60, "useProbability": True,
                        "sticky": 2, "cooldown": 1, "group": "weather", "case_sensitive": True}},
        {"id": 3, "keys": ["salt"], "secondary_keys": ["pepper", "vinegar"], "selective": True,
         "content": "Salt and pepper are traded on the quay.", "enabled": True, "insertion_order": 70,
         "extensions": {"selectiveLogic": 2, "match_whole_words": False, "exclude_recursion": True,
                        "scan_depth": 6, "delay_until_recursion": 2}},
        {"id": 4, "keys": ["kraken"], "content": "Nobody has seen the kraken.", "enabled": False,
         "insertion_order": 100, "comment": "Switched off"},
        {"keys": ["bell"], "content": "The bell rings twice for a storm.", "enabled": True, "insertion_order": 100,
         "extensions": {"position": 2, "match_character_description": True, "triggers": ["normal"]}},
    ],
}  # fmt: skip
CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        **{field: "" for field in ("personality", "scenario", "mes_example", "creator_notes", "system_prompt")},
        "name": "Mira",
        "description": "Keeps the harbour lantern.",
        "first_mes": "The lantern is lit.",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],  # (a card with tags gets SillyTavern's tag import dialog first)
        "creator": "",
        "character_version": "1",
        "extensions": {"talkativeness": "0.5", "fav": False, "world": "", "depth_prompt": {}},
        "character_book": BOOK,
    },
}
# The fields of an entry that decide whether and where it fires.
ACTIVATION = (
    "uid", "key", "keysecondary", "content", "constant", "selective", "selectiveLogic", "order", "position",
    "depth", "role", "disable", "probability", "useProbability", "excludeRecursion", "preventRecursion",
    "delayUntilRecursion", "group", "groupOverride", "groupWeight", "scanDepth", "caseSensitive",
    "matchWholeWords", "useGroupScoring", "sticky", "cooldown", "delay", "matchCharacterDescription", "triggers",
    "vectorized", "ignoreBudget",
)  # fmt: skip


def _activation(entries: dict) -> dict:
    return {str(uid): {field: entry.get(field) for field in ACTIVATION} for uid, entry in entries.items()}


@pytest.mark.parametrize("width", [1280, 390])
def test_a_card_with_a_book_goes_through_lorekeeper_into_sillytavern_with_its_book(st, st_open, lorekeeper, width):
    headers = {"Authorization": f"Bearer {lorekeeper.token}"}
    with httpx.Client(base_url=lorekeeper.url, headers=headers, timeout=30) as http:
        answer = http.post("/api/v1/characters/import", files={"file": ("Mira.png", harness.card_png(CARD))})
        assert answer.status_code == 201, answer.text
        character = Character.objects.get(pk=answer.json()["id"], user=lorekeeper.user)
        exported = http.get(f"/api/v1/characters/{character.pk}/card.png")
        assert exported.status_code == 200 and exported.content.startswith(b"\x89PNG")
    assert json.loads(base64.b64decode(png_text_chunks(exported.content)[b"chara"]))["data"]["character_book"] == BOOK

    page = st_open(install_extension=False)
    page.set_viewport_size({"width": width, "height": 900})
    path = st.root / f"Mira-{width}.png"
    path.write_bytes(exported.content)
    if not page.locator("#rm_button_characters").is_visible():
        page.click("#rightNavDrawerIcon")
    page.click("#rm_button_characters")
    page.set_input_files("#character_import_file", str(path))
    page.locator("#rm_print_characters_block .character_select .ch_name", has_text="Mira").wait_for()
    harness.open_character(page, "Mira")  # SillyTavern offers a card's lorebook when the character is opened
    offer = page.locator("dialog.popup[open]", has_text="embedded World/Lorebook")
    offer.wait_for(timeout=30_000)
    offer.locator(".popup-button-ok").click()
    world = st.user_dir / "worlds" / "Harbour Lore.json"
    harness.wait_until(world.exists, timeout=15, message="SillyTavern did not save the card's lorebook")
    page.locator("#world_popup_entries_list .world_entry").first.wait_for(timeout=15_000)
    page.wait_for_timeout(500)  # the drawer's opening animation
    page.screenshot(path=str(ARTIFACTS / "lorebooks" / f"sillytavern-card-book-{width}.png"))

    theirs = json.loads(world.read_text())["entries"]
    ours = {str(entry["uid"]): entry for entry in card_book_entries(character.card_data["data"]["character_book"])}
    assert len(theirs) == len(BOOK["entries"])
    assert _activation(ours) == _activation(theirs)
    saved = [p for p in (st.user_dir / "characters").glob("*.png") if re.match(r"Mira", p.name)]
    assert len(saved) == 1
    card = json.loads(base64.b64decode(png_text_chunks(saved[0].read_bytes())[b"chara"]))
    assert card["data"]["character_book"] == BOOK
