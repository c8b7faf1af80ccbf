"""Importing what SillyTavern memory extensions (docs/GLOSSARY.md) leave in a chat: ST-BME's legacy graph, Smart
Memory's chat state (and its long-term tier from settings.json), auto-recap's per-message summaries and scene recaps.
The chat is never changed, a second import adds nothing, and a chat keeps one summary.

The fixtures (tests/extraction/legacy_files/) are small chats shaped exactly as each extension's public source writes
its data (ST-BME graph v9, Smart Memory 1.7.x, ST-Auto-Summarize's recap era), written for these tests."""

import io
import json
from pathlib import Path

import pytest

from apps.chats.models import Chat
from apps.chats.services.chats import chat_export_lines, chat_import
from apps.extraction.models import ChatPipeline
from apps.extraction.services.legacy.recap import recap_text
from apps.extraction.services.legacy.run import chat_legacy_import, legacy_found
from apps.memories.models import Memory
from apps.memories.services.memories import memory_create

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "legacy_files"


def imported(user, name: str) -> Chat:
    return chat_import(user=user, stream=io.BytesIO((FIXTURES / name).read_bytes()), title=name)


def memories(chat, kind=None):
    found = Memory.objects.filter(source_chat=chat, origin="import").order_by("id")
    return found.filter(kind=kind) if kind else found


def test_an_st_bme_graph_becomes_events_states_facts_arcs_beliefs_and_a_summary(user):
    chat = imported(user, "st_bme.jsonl")
    before = b"".join(chat_export_lines(chat=chat))
    counts = chat_legacy_import(user=user, chat=chat)
    assert counts == {"st_bme": {"imported": 7}}
    (event,) = memories(chat, "event")
    assert event.content.startswith("Ambush at the docks: Night Guild assassins ambushed Lin Yue")
    assert event.importance == 3 and event.source_message_indices == [4] and event.chat == chat
    assert sorted(e.name for e in event.entities.all()) == ["Lin Yue", "Qingshui Town", "User"]
    states = {m.data["entity"]: m for m in memories(chat, "state")}
    assert (
        states["Lin Yue"].data["type"] == "character"
        and states["Lin Yue"].data["fields"]["goal"] == "find her missing brother"
    )
    assert states["Qingshui Town"].data["type"] == "place"
    (rule,) = memories(chat, "fact")
    assert rule.content == "Curfew: Nobody may be on the streets of Qingshui after the second drum."
    (thread,) = memories(chat, "arc")
    assert thread.data["status"] == "open" and thread.content.startswith("The missing brother")
    (belief,) = memories(chat, "epistemic")
    assert belief.data["holder"] == "Lin Yue" and belief.data["stance"] == "suspects"
    (summary,) = memories(chat, "summary")
    assert summary.content.startswith("Lin Yue survived a Guild ambush") and summary.data["summary_end"] == 2
    assert ChatPipeline.objects.get(chat=chat).through["compaction"] == 2  # compaction continues from there
    assert all(m.data["legacy"]["source"] == "st_bme" for m in memories(chat))
    assert b"".join(chat_export_lines(chat=Chat.objects.get(pk=chat.pk))) == before  # the chat is untouched


def test_importing_again_adds_nothing(user):
    chat = imported(user, "st_bme.jsonl")
    chat_legacy_import(user=user, chat=chat)
    counts = chat_legacy_import(user=user, chat=chat)
    assert counts == {"st_bme": {"already imported": 7}}
    assert memories(chat).count() == 7


def test_a_graph_kept_as_a_json_string_is_read_and_an_empty_one_is_nothing(user):
    chat = imported(user, "st_bme.jsonl")
    graph = chat.chat_metadata["st_bme_graph"]
    Chat.objects.filter(pk=chat.pk).update(chat_metadata={**chat.chat_metadata, "st_bme_graph": json.dumps(graph)})
    assert legacy_found(chat=Chat.objects.get(pk=chat.pk)) == {"st_bme": 7}
    Chat.objects.filter(pk=chat.pk).update(chat_metadata={"st_bme_graph": None})
    assert legacy_found(chat=Chat.objects.get(pk=chat.pk)) == {}


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"version": 1, "nodes": [], "x": NaN}'])
def test_a_graph_string_no_graph_can_come_from_is_nothing_not_an_error(web, user, text):
    """A string nested past what the parser follows raised RecursionError on the chat's page (which asks what the
    chat carries); NaN is no graph's either, and could not be stored from one."""
    chat = imported(user, "st_bme.jsonl")
    Chat.objects.filter(pk=chat.pk).update(chat_metadata={**chat.chat_metadata, "st_bme_graph": text})
    assert legacy_found(chat=Chat.objects.get(pk=chat.pk)) == {}
    assert web.get(f"/chats/{chat.pk}/").status_code == 200


def test_smart_memorys_chat_state_becomes_session_memories_scenes_arcs_profiles_and_the_ledger(user):
    chat = imported(user, "smart_memory.jsonl")
    counts = chat_legacy_import(user=user, chat=chat)
    assert counts == {"smart_memory": {"imported": 15}}
    revelation = memories(chat, "revelation").get()
    assert revelation.importance == 3 and revelation.valid_from == 15
    assert sorted(e.name for e in revelation.entities.all()) == ["Ashen Court", "Elara"]
    detail = memories(chat, "detail").get()
    assert detail.status == "retired" and detail.superseded_by == revelation  # Smart Memory's supersession kept
    assert memories(chat, "scene_recap").count() == 2
    arcs = {m.content: m.data for m in memories(chat, "arc")}
    pinned = arcs["Senjin must reach the Heartwood before the new moon."]
    assert (pinned["status"], pinned["persistent"]) == ("open", True)
    assert sum(1 for data in arcs.values() if data["status"] == "resolved") == 2  # a resolved arc and a summary
    assert sorted(m.data["section"] for m in memories(chat, "profile")) == [
        "character_state",
        "relationship_matrix",
        "world_state",
    ]
    ledger = {m.data["entity"]: m.data for m in memories(chat, "state")}
    assert ledger["elara"]["fields"]["mood"] == "watchful" and ledger["forged map"]["type"] == "object"
    (summary,) = memories(chat, "summary")
    assert summary.data["summary_end"] == 2  # summaryEnd 18, but the chat has 2 messages


def test_smart_memorys_long_term_tier_comes_from_its_settings(user):
    chat = imported(user, "smart_memory.jsonl")
    settings = json.loads((FIXTURES / "smart_memory_settings.json").read_text())
    counts = chat_legacy_import(user=user, chat=chat, smart_memory_settings=settings)
    elara = chat.characters.get(name="Elara")
    persistent = Memory.objects.filter(character=elara, origin="import")
    assert sorted(persistent.values_list("kind", flat=True)) == [
        "arc",
        "canon",
        "epistemic",
        "epistemic",
        "relationship",
        "relationship",
    ]
    history = persistent.get(kind="relationship", data__history=True)
    assert history.content == "Elara -> Senjin: warm, cautious (moderate)"
    hiding = persistent.get(kind="epistemic", data__stance="hiding")
    assert hiding.data["holder"] == "Elara" and hiding.data["target"] == "Senjin"
    assert counts["smart_memory"]["imported"] == 15 + 6


def test_smart_memory_settings_must_have_its_characters(user, api):
    chat = imported(user, "smart_memory.jsonl")
    response = api.post(f"/api/v1/chats/{chat.pk}/legacy-import", {"smart_memory_settings": {"x": 1}}, format="json")
    assert response.status_code == 400 and response.json()["extra"]["field"] == "smart_memory_settings"
    assert not memories(chat).exists()


def test_smart_memory_settings_holding_what_the_database_cannot_store_are_refused_or_left_out(user, api):
    """A NUL in a memory's text was a 500 where the memory was stored, and so was a message index past a PostgreSQL
    integer: the text is refused naming the field, the index left out like any other that is not one."""
    chat = imported(user, "smart_memory.jsonl")
    settings = json.loads((FIXTURES / "smart_memory_settings.json").read_text())
    first = settings["smart_memory"]["characters"]["Elara"]["memories"][0]
    url = f"/api/v1/chats/{chat.pk}/legacy-import"
    first["content"] = "Elara\x00 trusts Senjin."
    response = api.post(url, {"smart_memory_settings": settings["smart_memory"]}, format="json")
    assert response.status_code == 400 and "NUL" in str(response.json()["smart_memory_settings"])
    assert not memories(chat).exists()
    first["content"], first["source_messages"], first["valid_from"] = "Elara trusts Senjin.", [14, 2**31], 2**40
    response = api.post(url, {"smart_memory_settings": settings["smart_memory"]}, format="json")
    assert response.status_code == 200, response.content[:300]
    kept = Memory.objects.get(content="Elara trusts Senjin.", origin="import")
    assert (kept.source_message_indices, kept.valid_from) == ([14], None)


def test_auto_recap_summaries_and_scene_recaps(user):
    chat = imported(user, "auto_recap.jsonl")
    counts = chat_legacy_import(user=user, chat=chat)
    assert counts == {"auto_recap": {"imported": 6}}
    assert [m.source_message_indices for m in memories(chat, "event")] == [[0], [1], [2]]
    scenes = list(memories(chat, "scene_recap"))
    assert scenes[0].data["title"] == "Meeting at the Rusty Anchor 0-1"
    assert scenes[0].content.startswith("Alice and User meet at the Rusty Anchor tavern")
    assert scenes[1].content.startswith("Alice and User tracked Garrick to the old lighthouse")
    (summary,) = memories(chat, "summary")
    assert summary.content.startswith("DEVELOPMENTS:") and summary.data["summary_end"] == 3


def test_a_chat_with_a_summary_keeps_it(user):
    chat = imported(user, "auto_recap.jsonl")
    memory_create(user=user, kind="summary", content="Our own summary.", chat=chat)
    counts = chat_legacy_import(user=user, chat=chat)
    assert counts["auto_recap"]["summary left out (the chat has one)"] == 1
    assert Memory.objects.filter(chat=chat, kind="summary", status="active").count() == 1


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Plain text.", ("", "Plain text.")),
        ('{"sn": "Docks", "plot": "They fought."}', ("Docks", "They fought.")),
        ('```json\n{"sn": "Docks", "extracted": ["a", "b"]}\n```', ("Docks", "a\nb")),
        ('{"developments": ["x"], "open": ["y"]}', ("", "DEVELOPMENTS: x\nOPEN: y")),
        ('{"scene_name": "S", "stage1": {"sn": "S1"}, "stage3": {"developments": ["d"]}}', ("S", "DEVELOPMENTS: d")),
        ({"content": "Running recap."}, ("", "Running recap.")),
        ('{"sn": NaN}', ("", '{"sn": NaN}')),  # not JSON a memory could hold: the text as it is
        ("{" + "[" * 100_000, ("", "{" + "[" * 100_000)),  # nested past what the parser follows: the same
    ],
)
def test_recap_strings_in_every_shape(raw, expected):
    assert recap_text(raw) == expected


def test_the_api_tells_what_a_chat_carries_and_imports_it(user, api, other_api):
    chat = imported(user, "auto_recap.jsonl")
    assert api.get(f"/api/v1/chats/{chat.pk}/legacy-import").json() == {"found": {"auto_recap": 6}}
    response = api.post(f"/api/v1/chats/{chat.pk}/legacy-import", {}, format="json")
    assert response.status_code == 200 and response.json()["imported"] == {"auto_recap": {"imported": 6}}
    assert other_api.get(f"/api/v1/chats/{chat.pk}/legacy-import").status_code == 404
    assert other_api.post(f"/api/v1/chats/{chat.pk}/legacy-import", {}, format="json").status_code == 404


def test_the_chat_page_offers_the_import(web, user):
    chat = imported(user, "smart_memory.jsonl")
    page = web.get(f"/chats/{chat.pk}/").content.decode()
    assert f'hx-get="/chats/{chat.pk}/legacy-import/"' in page  # the offer loads after the page
    offer = web.get(f"/chats/{chat.pk}/legacy-import/", HTTP_HX_REQUEST="true").content.decode()
    assert "Smart Memory: 15" in offer and "Import them" in offer
    response = web.post(f"/chats/{chat.pk}/legacy-import/")
    assert response.status_code == 302
    assert memories(chat).count() == 15
    assert "Import them" not in web.get(f"/chats/{chat.pk}/legacy-import/").content.decode()  # nothing new


# Data each extension could not have written, as a client may keep it (each raised on the chat's page before).
ODD_METADATA = [
    {"st_bme_graph": {"version": 1, "nodes": [], "edges": 5}},
    {"st_bme_graph": {"version": 1, "nodes": [], "summaryState": {"entries": 5}}},
    {"smartMemory": {"sessionEntities": 5}},
    {"smartMemory": {"sessionMemories": 5}},
    {"smartMemory": {"sessionMemories": [{"type": ["scene"], "content": "x"}]}},
    {"smartMemory": {"sceneHistory": 5}},
    {"auto_recap_running_scene_recaps": {"versions": 5}},
]
ODD_EXTRA = [
    {"auto_recap_memory": {"scene_recap_memory": {"developments": 5}}},
    {"auto_recap_memory": {"scene_recap_memory": {"stage3": {"developments": ["d"]}, "stage1": "s"}}},
]


@pytest.mark.parametrize(
    ("metadata", "extra"), [(m, {}) for m in ODD_METADATA] + [({}, e) for e in ODD_EXTRA], ids=lambda v: str(v)[:60]
)
def test_extension_data_in_a_shape_its_extension_never_writes_is_unreadable_not_an_error(
    web, api, user, metadata, extra
):
    chat = imported(user, "auto_recap.jsonl")
    Chat.objects.filter(pk=chat.pk).update(chat_metadata=metadata)
    if extra:
        chat.messages.filter(index=1).update(extra=extra)
    offer = web.get(f"/chats/{chat.pk}/legacy-import/", HTTP_HX_REQUEST="true")
    assert offer.status_code == 200
    response = api.post(f"/api/v1/chats/{chat.pk}/legacy-import", {}, format="json")
    assert response.status_code == 200, response.content
    assert any("unreadable" in what for counts in response.json()["imported"].values() for what in counts)
