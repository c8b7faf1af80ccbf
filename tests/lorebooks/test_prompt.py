"""World Info in the web chat's prompt: the books a chat links, its character's card book and the account's global
books scanned as SillyTavern scans them, each activated entry where SillyTavern puts it, listed on the Prompt page
with why it fired, and sticky entries kept in the chat's metadata."""

from __future__ import annotations

import json

import pytest

from apps.chats.models import Chat
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.lorebooks.services.books import lorebook_import
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db


def _entries(*entries):
    """A file as SillyTavern saves one: the fields its editor always writes, then the entry's own."""
    saved = {"position": 0, "selective": True, "useProbability": True, "probability": 100, "order": 100}
    return {"entries": {str(n): {"uid": n, **saved, **entry} for n, entry in enumerate(entries)}}


@pytest.fixture
def mira(user):
    card = {"spec": "chara_card_v2", "data": {"name": "Mira", "character_book": {"name": "Mira's book", "entries": [
        {"keys": ["lantern"], "content": "CARD: the lantern is older than the town.", "insertion_order": 5,
         "enabled": True, "position": "after_char", "extensions": {}},
    ]}}}  # fmt: skip
    return CharacterFactory(user=user, name="Mira", description="Keeps the lantern.", card_data=card)


def _chat(user, mira, *lines, world="Harbour"):
    chat = chat_create(user=user, title="Harbour", character_ids=[mira.pk], user_name="Rowan")
    chat.chat_metadata = {"world_info": world}
    chat.save(update_fields=["chat_metadata"])
    messages = [{"name": name, "is_user": name == "Rowan", "mes": text} for name, text in lines]
    return chat_append(chat=chat, messages=messages, integrity=chat.integrity).chat


def _generate(api, chat, message):
    response = api.post(f"/api/v1/chats/{chat.pk}/generate", {"stream": False, "message": message}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def test_activated_entries_are_placed_where_sillytavern_puts_them(api, user, mira, llm):
    lorebook_import(user=user, name="Harbour", data=_entries(
        {"key": ["gull"], "content": "BEFORE: the Gull is Hale's ship.", "position": 0},
        {"key": ["storm"], "content": "DEPTH: storms come from the west.", "position": 4, "depth": 1, "role": 1},
        {"key": ["ghost"], "content": "never: nobody said ghost", "position": 1},
        {"constant": True, "content": "NOTE: the harbour is closed at night.", "position": 2},
    ))  # fmt: skip
    chat = _chat(user, mira, ("Mira", "The lantern is lit."), ("Rowan", "A storm is coming."))
    _generate(api, chat, "Did the Gull pass the lantern?")
    sent = llm.server.requests[-1]["body"]["messages"]
    contents = [m["content"] for m in sent]
    before = contents.index("BEFORE: the Gull is Hale's ship.")
    assert before == 1 and contents[2] == "Keeps the lantern."  # after the system prompt, before the card
    assert contents.index("CARD: the lantern is older than the town.") > contents.index("Keeps the lantern.")
    depth = next(m for m in sent if m["content"] == "DEPTH: storms come from the west.")
    assert depth["role"] == "user" and sent[sent.index(depth) + 1]["content"] == "Did the Gull pass the lantern?"
    assert {"role": "system", "content": "NOTE: the harbour is closed at night."} in sent  # the author's note
    assert "never: nobody said ghost" not in json.dumps(sent)

    page = api.get(f"/chats/{chat.pk}/messages/3/prompt/")
    assert page.status_code in (200, 302)


def test_the_prompt_page_lists_each_entry_and_why_it_fired(web, user, mira, llm):
    lorebook_import(user=user, name="Harbour", data=_entries(
        {"key": ["gull"], "content": "The Gull is Hale's ship.", "comment": "The Gull"},
        {"constant": True, "content": "Closed at night.", "comment": "Night rule"},
    ))  # fmt: skip
    chat = _chat(user, mira, ("Mira", "The lantern is lit."))
    response = web.post(f"/api/v1/chats/{chat.pk}/generate", {"stream": False, "message": "The gull?"},
                        content_type="application/json")  # fmt: skip
    assert response.status_code == 200
    page = web.get(f"/chats/{chat.pk}/messages/2/prompt/").content.decode()
    assert "World Info" in page and "The Gull" in page and "Night rule" in page
    assert "key <code>gull</code> in the newest message" in page
    assert "constant" in page and "Harbour" in page and "Mira&#x27;s book" in page


def test_a_sticky_entry_stays_for_its_messages_and_is_kept_in_the_chat(api, user, mira, llm):
    lorebook_import(user=user, name="Harbour", data=_entries(
        {"key": ["gull"], "content": "STICKY: the Gull is in port.", "sticky": 3},
    ))  # fmt: skip
    chat = _chat(user, mira, ("Mira", "Evening."))
    _generate(api, chat, "Is the gull in?")
    timed = Chat.objects.get(pk=chat.pk).chat_metadata["timedWorldInfo"]
    assert timed["sticky"]["Harbour.0"]["start"] == 2 and timed["sticky"]["Harbour.0"]["end"] == 5
    _generate(api, Chat.objects.get(pk=chat.pk), "What about the weather?")  # no key: still sticky
    assert "STICKY: the Gull is in port." in json.dumps(llm.server.requests[-1]["body"]["messages"])
    _generate(api, Chat.objects.get(pk=chat.pk), "And now?")  # 6 messages: the stickiness is over
    assert "STICKY" not in json.dumps(llm.server.requests[-1]["body"]["messages"])


@pytest.mark.parametrize("kept", ["x", [1], 5])
def test_timed_effects_a_client_kept_in_another_shape_do_not_stop_a_reply(api, user, mira, llm, kept):
    """`timedWorldInfo` is the client's metadata: a string, a list or a number there raised AttributeError on every
    reply of the chat. It is read as no timed effects, and the reply's own are kept."""
    lorebook_import(user=user, name="Harbour", data=_entries(
        {"key": ["gull"], "content": "STICKY: the Gull is in port.", "sticky": 3},
    ))  # fmt: skip
    chat = _chat(user, mira, ("Mira", "Evening."))
    response = api.patch(
        f"/api/v1/chats/{chat.pk}/metadata", json.dumps({"timedWorldInfo": kept}),
        content_type="application/merge-patch+json", HTTP_IF_MATCH=f'"{chat.integrity}"',
    )  # fmt: skip
    assert response.status_code == 200, response.content
    _generate(api, Chat.objects.get(pk=chat.pk), "Is the gull in?")
    assert "STICKY: the Gull is in port." in json.dumps(llm.server.requests[-1]["body"]["messages"])
    assert Chat.objects.get(pk=chat.pk).chat_metadata["timedWorldInfo"]["sticky"]["Harbour.0"]["start"] == 2


def test_a_link_to_a_missing_book_is_shown_not_fatal(api, user, mira, llm):
    chat = _chat(user, mira, ("Mira", "Evening."), world="Nowhere")
    body = _generate(api, chat, "Hello")
    assert body["state"] == "done"
    page = api.get(f"/chats/{chat.pk}/messages/2/prompt/")
    assert page.status_code in (200, 302)


def test_another_users_book_of_the_linked_name_is_never_read(api, user, other_user, mira, llm):
    lorebook_import(user=other_user, name="Harbour", data=_entries({"constant": True, "content": "THEIRS"}))
    chat = _chat(user, mira, ("Mira", "Evening."))
    _generate(api, chat, "Hello")
    assert "THEIRS" not in json.dumps(llm.server.requests[-1]["body"]["messages"])


def _note_prompt(user, mira, metadata: dict, *lines) -> list[dict]:
    from apps.generation.services.generate import generation_prepare

    chat = _chat(user, mira, *lines)
    Chat.objects.filter(pk=chat.pk).update(chat_metadata={"world_info": "Harbour", **metadata})
    chat = Chat.objects.get(pk=chat.pk)
    return generation_prepare(user=user, chat=chat, message="Is the harbour open?").generation.prompt


@pytest.mark.parametrize(
    ("metadata", "where"),
    [
        ({}, None),  # SillyTavern's defaults: in the chat, 4 deep, as system
        ({"note_position": 0}, 1),  # "in prompt": right after the system prompt
        ({"note_position": 2}, 0),  # "before prompt": before it
    ],
)
def test_the_authors_note_goes_where_the_chat_says_with_its_world_info(user, mira, llm, metadata, where):
    lorebook_import(user=user, name="Harbour", data=_entries(
        {"constant": True, "content": "TOP: the bell rings twice.", "position": 2},
        {"constant": True, "content": "BOTTOM: the tide is high.", "position": 3},
    ))  # fmt: skip
    lines = [("Mira", "Evening."), ("Rowan", "Evening."), ("Mira", "Cold tonight."), ("Rowan", "It is."),
             ("Mira", "Tea?")]  # fmt: skip
    prompt = _note_prompt(user, mira, {"note_prompt": "Mira is tired.", **metadata}, *lines)
    note = {"role": "system", "content": "TOP: the bell rings twice.\nMira is tired.\nBOTTOM: the tide is high."}
    assert note in prompt
    at = prompt.index(note)
    if where is None:
        assert [line["content"] for line in prompt[at + 1 :]] == ["Cold tonight.", "It is.", "Tea?",
                                                                   "Is the harbour open?"]  # fmt: skip
    else:
        assert at == where and prompt[1 - where]["content"].startswith("Write Mira's next reply")


def test_a_note_without_world_info_is_placed_too_and_its_interval_holds(user, mira, llm):
    lines = [("Mira", "Evening."), ("Rowan", "Evening.")]
    every = _note_prompt(user, mira, {"note_prompt": "Mira is tired."}, *lines)
    assert {"role": "system", "content": "Mira is tired."} in every
    never = _note_prompt(user, mira, {"note_prompt": "Mira is tired.", "note_interval": 0}, *lines)
    assert "Mira is tired." not in json.dumps(never)
    # every 3rd message of the person's: they have sent 2 (one above, one now)
    third = _note_prompt(user, mira, {"note_prompt": "Mira is tired.", "note_interval": 3}, *lines)
    assert "Mira is tired." not in json.dumps(third)
    second = _note_prompt(user, mira, {"note_prompt": "Mira is tired.", "note_interval": 2}, *lines)
    assert {"role": "system", "content": "Mira is tired."} in second


def test_an_outlet_macro_takes_the_entries_of_its_outlet(user, llm):
    from apps.generation.services.generate import generation_prepare

    lorebook_import(user=user, name="Harbour", data=_entries(
        {"key": ["storm"], "content": "OUTLET: storms come from the west.", "position": 7, "outletName": "weather",
         "order": 50},
        {"constant": True, "content": "OUTLET: the sea is grey.", "position": 7, "outletName": "weather",
         "order": 150},
        {"constant": True, "content": "never placed: no outlet macro asks for it", "position": 7,
         "outletName": "tides"},
    ))  # fmt: skip
    description = "Keeps the lantern. Weather: {{outlet::weather}}. Moon: {{outlet::moon}}."
    mira = CharacterFactory(user=user, name="Mira", description=description)
    chat = _chat(user, mira, ("Mira", "Evening."))
    prompt = generation_prepare(user=user, chat=chat, message="A storm?").generation.prompt
    description = next(line["content"] for line in prompt if line["content"].startswith("Keeps the lantern."))
    # in SillyTavern's order for an outlet: the highest order first
    assert description == (
        "Keeps the lantern. Weather: OUTLET: the sea is grey.\nOUTLET: storms come from the west.. Moon: ."
    )
    assert "never placed" not in json.dumps(prompt)


def test_the_personas_book_is_scanned_in_its_chats(web, user, mira, llm):
    from apps.chats.models import Persona
    from apps.generation.services.generate import generation_prepare

    past = _entries({"key": ["ship"], "content": "PERSONA: Rowan sailed."})
    lorebook_import(user=user, name="Rowan's past", data=past)
    response = web.post("/personas/", {"name": "Rowan", "description": "A sailor.", "lorebook": "Rowan's past"})
    assert response.status_code == 302
    rowan = Persona.objects.get(user=user, name="Rowan")
    assert rowan.lorebook == "Rowan's past"
    chat = _chat(user, mira, ("Mira", "Evening."), world="")
    Chat.objects.filter(pk=chat.pk).update(persona=rowan)
    prompt = generation_prepare(user=user, chat=Chat.objects.get(pk=chat.pk), message="My ship?").generation
    assert "PERSONA: Rowan sailed." in json.dumps(prompt.prompt)
    assert [entry["world"] for entry in prompt.prompt_info["lorebook"]["entries"]] == ["Rowan's past"]
    Persona.objects.filter(pk=rowan.pk).update(lorebook="Gone")
    again = generation_prepare(user=user, chat=Chat.objects.get(pk=chat.pk), message="My ship?").generation
    assert (
        "The persona links the lorebook 'Gone', which you have not imported."
        in again.prompt_info["lorebook"]["problems"]
    )
