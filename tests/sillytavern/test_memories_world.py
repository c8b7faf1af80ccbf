"""A character's memories, exported from Lorekeeper as World Info, load into a real SillyTavern 1.19.0 as they are
and work there (docs/LOREBOOKS.md, "Memories as a lorebook"): a person downloads the file over HTTP, imports it in
SillyTavern's World Info panel in Chromium, turns it on with `/world`, and chats. The entry whose entity the
message names by an alias goes into the prompt SillyTavern's model receives; the vectorized one (no entities) does
not, Vector Storage being off; the retired memory is not in the book at all."""

from __future__ import annotations

import json

import httpx
import pytest

from apps.memories.services.memories import memory_create, memory_retire
from tests.browsers import ARTIFACTS
from tests.chats.factories import CharacterFactory
from tests.sillytavern import harness

pytestmark = pytest.mark.django_db(transaction=True)


def test_exported_memories_load_into_sillytavern_and_fire_on_an_alias(st, st_open, llm_server, lorekeeper):
    user = lorekeeper.user
    mira = CharacterFactory(user=user, name="Mira")
    hale = {"name": "Hale", "type": "person", "aliases": ["the captain"]}
    memory_create(user=user, character=mira, kind="fact", content="Hale owns the Gull, a two-masted ship.",
                  importance=3, entities=[hale, {"name": "Gull", "type": "ship"}])  # fmt: skip
    memory_create(user=user, character=mira, kind="arc", content="Mira learns to trust strangers.")
    retired = memory_create(user=user, character=mira, kind="fact", content="Hale drowned.", entities=[hale])
    memory_retire(memory=retired)
    headers = {"Authorization": f"Bearer {lorekeeper.token}"}
    with httpx.Client(base_url=lorekeeper.url, headers=headers, timeout=30) as http:
        answer = http.get("/api/v1/lorebooks/from-memories", params={"character_id": mira.pk})
    assert answer.status_code == 200, answer.text
    path = st.root / "Mira memories.json"
    path.write_bytes(answer.content)

    st.add_character("Mira", first_mes="The lantern is lit.", description="A harbour clerk.", chat="Mira - memories")
    page = st_open(install_extension=False)
    page.click("#WIDrawerIcon")
    page.set_input_files("#world_import_file", str(path))
    world = st.user_dir / "worlds" / "Mira memories.json"
    harness.wait_until(world.exists, timeout=15, message="SillyTavern did not import the file")
    assert json.loads(world.read_text())["entries"] == answer.json()["entries"]  # loaded as it is
    page.locator("#world_popup_entries_list .world_entry").first.wait_for(timeout=15_000)
    page.screenshot(path=str(ARTIFACTS / "lorebooks" / "sillytavern-memories-world.png"))
    page.click("#WIDrawerIcon")

    harness.open_character(page, "Mira")
    page.fill("#send_textarea", "/world Mira memories")
    page.click("#send_but")
    page.get_by_text("Activated world: Mira memories").wait_for(timeout=15_000)  # SillyTavern's toast
    llm_server.on(lambda prompt: True, "He did, at dawn.")
    harness.send_message(page, "Did the captain come back?")
    prompt = json.dumps(llm_server.requests[-1]["body"]["messages"])
    assert "Hale owns the Gull, a two-masted ship." in prompt
    assert "Mira learns to trust strangers." not in prompt
    assert "Hale drowned." not in prompt
