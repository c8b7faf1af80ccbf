"""The message recall layer: every non-empty message (its selected swipe) is a `message` memory kept in step with
the chat by a reconciliation after every write, and every memory gets a vector under the user's current model."""

import json
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.chats.models import Chat
from apps.chats.services.chats import chat_export_lines, chat_import
from apps.memories import tasks
from apps.memories.embeddings import text_hash
from apps.memories.models import Memory, MemoryScope
from apps.memories.services.indexing import chat_index_progress
from apps.memories.services.memories import memory_create
from apps.memories.services.settings import embedding_settings_set
from tests.memories.helpers import (
    assert_deferred_constraints_hold,
    by_index,
    if_match_stored,
    jsonl,
    jsonl_bytes,
    message_memories,
)

pytestmark = pytest.mark.django_db

MODEL_KEY = "openai:scripted"


def _import(api, *messages) -> Chat:
    response = api.post(
        "/api/v1/chats/import?title=Lantern", data=jsonl_bytes(*messages), content_type="application/jsonl"
    )
    assert response.status_code == 201, response.content
    return Chat.objects.get(pk=response.json()["id"])


def _vector(memory: Memory) -> list[float]:
    return [float(x) for x in memory.embedding]


def _assert_embedded(memory: Memory, server, *, model: str = "scripted") -> None:
    assert memory.embedding_model == f"openai:{model}" and memory.embedding_dim == server.dim
    assert _vector(memory) == pytest.approx(server.vector_for(memory.content, model), abs=1e-6)


# ----------------------------------------------------------------------------------------------------- import


def test_import_indexes_every_non_empty_message_as_name_and_text(
    api, user, scripted, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        chat = _import(
            api,
            ("Mira", "The lantern went out at midnight."),
            ("You", ""),
            ("You", "Who relit it?"),
            {"name": "", "is_user": False, "is_system": True, "mes": "Night falls.", "extra": {}},
        )
    memories = message_memories(chat)
    assert [(m.message_index, m.content) for m in memories] == [
        (0, "Mira: The lantern went out at midnight."),
        (2, "You: Who relit it?"),
        (3, "Night falls."),
    ]
    for memory in memories:
        assert memory.user_id == user.pk and memory.chat_id == chat.pk and memory.character_id is None
        assert memory.source_chat_id == chat.pk and memory.source_message_indices == [memory.message_index]
        assert memory.content_hash == text_hash(memory.content)
        _assert_embedded(memory, scripted)
    assert sorted(scripted.embedded_texts()) == sorted(m.content for m in memories)
    assert MemoryScope.objects.get(chat=chat).indexed_integrity == chat.integrity


def test_imported_message_memories_carry_the_story_time_of_each_send_date_format(
    user, scripted, django_capture_on_commit_callbacks
):
    stamps = ["2024-05-01T12:00:00.000Z", 1714564800000, "2024-05-01 @12h00m00s", "May 1, 2024 12:00pm"]
    messages = [
        {"name": "Mira", "is_user": False, "mes": f"Line {i}.", "send_date": stamp, "extra": {}}
        for i, stamp in enumerate(stamps)
    ]
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_import(user=user, stream=jsonl(*messages))
    expected = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    # The last form is what SillyTavern 1.12 writes (tests/chats/fixtures/v112_header.jsonl).
    assert {m.message_index: m.occurred_at for m in message_memories(chat)} == {i: expected for i in range(4)}


# ------------------------------------------------------------------------------------------------------ edits


def test_editing_a_message_through_the_message_api_reindexes_only_that_message(
    api, indexed_chat, scripted, django_capture_on_commit_callbacks
):
    before = by_index(indexed_chat)
    scripted.forget()
    with django_capture_on_commit_callbacks(execute=True):
        response = api.patch(
            f"/api/v1/chats/{indexed_chat.pk}/messages/1/",
            {"mes": "Who climbed the tower?"},
            format="json",
            **if_match_stored(indexed_chat),
        )
    assert response.status_code == 200, response.content
    after = by_index(indexed_chat)
    assert after[1].content == "You: Who climbed the tower?"
    assert after[1].content_hash == text_hash("You: Who climbed the tower?")
    _assert_embedded(after[1], scripted)
    assert _vector(after[1]) != _vector(before[1])
    for index in (0, 2, 3):
        assert after[index].pk == before[index].pk and _vector(after[index]) == _vector(before[index])
    assert scripted.embedded_texts() == ["You: Who climbed the tower?"]


def test_a_sync_patch_edit_reindexes_the_message(api, indexed_chat, scripted, django_capture_on_commit_callbacks):
    scripted.forget()
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/v1/chats/{indexed_chat.pk}/patch",
            {"operations": [{"op": "replace", "path": "/2/mes", "value": "Corvin used a flint."}]},
            format="json",
            **if_match_stored(indexed_chat),
        )
    assert response.status_code == 200, response.content
    memory = by_index(indexed_chat)[2]
    assert memory.content == "Mira: Corvin used a flint."
    _assert_embedded(memory, scripted)
    assert scripted.embedded_texts() == ["Mira: Corvin used a flint."]


def test_swiping_reindexes_the_message_with_the_selected_swipe(
    user, api, scripted, django_capture_on_commit_callbacks
):
    swipes = ["The tide is low.", "The tide is rising fast.", "No tide today."]
    message = {"name": "Mira", "is_user": False, "mes": swipes[0], "swipes": swipes, "swipe_id": 0, "extra": {}}
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_import(user=user, stream=jsonl(("You", "How is the sea?"), message))
    first = by_index(chat)[1]
    assert first.content == "Mira: The tide is low."

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/v1/chats/{chat.pk}/patch",
            {
                "operations": [
                    {"op": "replace", "path": "/1/swipe_id", "value": 1},
                    {"op": "replace", "path": "/1/mes", "value": swipes[1]},
                ]
            },
            format="json",
            **if_match_stored(chat),
        )
    assert response.status_code == 200, response.content
    swiped = by_index(chat)[1]
    assert swiped.content == "Mira: The tide is rising fast."
    _assert_embedded(swiped, scripted)
    assert not Memory.objects.filter(pk=first.pk).exists()

    with django_capture_on_commit_callbacks(execute=True):
        api.patch(
            f"/api/v1/chats/{chat.pk}/messages/1/",
            {"swipe_id": 2, "mes": swipes[2]},
            format="json",
            **if_match_stored(chat),
        )
    assert by_index(chat)[1].content == "Mira: No tide today."


def test_a_message_emptied_leaves_the_index_and_comes_back_when_filled(
    api, indexed_chat, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        api.patch(
            f"/api/v1/chats/{indexed_chat.pk}/messages/3/", {"mes": ""}, format="json", **if_match_stored(indexed_chat)
        )
    assert sorted(by_index(indexed_chat)) == [0, 1, 2]
    with django_capture_on_commit_callbacks(execute=True):
        api.patch(
            f"/api/v1/chats/{indexed_chat.pk}/messages/3/",
            {"mes": "Brave indeed."},
            format="json",
            **if_match_stored(indexed_chat),
        )
    assert by_index(indexed_chat)[3].content == "You: Brave indeed."


def test_messages_appended_through_the_sync_api_are_indexed(
    api, indexed_chat, scripted, django_capture_on_commit_callbacks
):
    before = by_index(indexed_chat)
    scripted.forget()
    new = [
        {"name": "You", "is_user": True, "is_system": False, "mes": "Where is Corvin now?", "extra": {}},
        {"name": "Mira", "is_user": False, "is_system": False, "mes": "Asleep in the tower.", "extra": {}},
    ]
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/v1/chats/{indexed_chat.pk}/append",
            {"messages": new},
            format="json",
            **if_match_stored(indexed_chat),
        )
    assert response.status_code == 200, response.content
    after = by_index(indexed_chat)
    assert (after[4].content, after[5].content) == ("You: Where is Corvin now?", "Mira: Asleep in the tower.")
    assert [after[i].pk for i in range(4)] == [before[i].pk for i in range(4)]
    assert sorted(scripted.embedded_texts()) == ["Mira: Asleep in the tower.", "You: Where is Corvin now?"]


def test_a_full_save_keeps_the_memories_of_unchanged_messages(
    api, indexed_chat, scripted, django_capture_on_commit_callbacks
):
    before = by_index(indexed_chat)
    lines = [json.loads(line) for line in b"".join(chat_export_lines(chat=indexed_chat)).decode().split("\n")]
    lines[2]["mes"] = "Who relit the lantern?"
    scripted.forget()
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/v1/chats/{indexed_chat.pk}/save",
            {"chat": lines, "integrity": str(Chat.objects.get(pk=indexed_chat.pk).integrity)},
            format="json",
        )
    assert response.status_code == 200, response.content
    after = by_index(indexed_chat)
    assert [after[i].pk for i in (0, 2, 3)] == [before[i].pk for i in (0, 2, 3)]
    assert after[1].content == "You: Who relit the lantern?"
    assert scripted.embedded_texts() == ["You: Who relit the lantern?"]
    assert_deferred_constraints_hold()


# ------------------------------------------------------------------------------------------- deletes and moves


def test_deleting_a_message_drops_its_memory_and_moves_the_later_ones_without_re_embedding(
    api, indexed_chat, scripted, django_capture_on_commit_callbacks
):
    before = by_index(indexed_chat)
    scripted.forget()
    with django_capture_on_commit_callbacks(execute=True):
        response = api.delete(f"/api/v1/chats/{indexed_chat.pk}/messages/1/", **if_match_stored(indexed_chat))
    assert response.status_code == 200, response.content
    after = by_index(indexed_chat)
    assert sorted(after) == [0, 1, 2]
    assert not Memory.objects.filter(pk=before[1].pk).exists()
    assert [after[i].pk for i in (0, 1, 2)] == [before[0].pk, before[2].pk, before[3].pk]
    assert after[1].content == "Mira: Old Corvin climbed the tower with a match." and after[
        1
    ].source_message_indices == [1]
    assert _vector(after[2]) == _vector(before[3])
    assert scripted.requests == []
    assert chat_index_progress(chat=indexed_chat) == {"indexable_messages": 3, "indexed_messages": 3, "pending": 0}
    assert_deferred_constraints_hold()


def test_inserting_a_message_moves_the_later_memories_and_embeds_only_the_new_one(
    api, indexed_chat, scripted, django_capture_on_commit_callbacks
):
    before = by_index(indexed_chat)
    scripted.forget()
    new = {"name": "Mira", "is_user": False, "is_system": False, "mes": "A gull screamed.", "extra": {}}
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/v1/chats/{indexed_chat.pk}/patch",
            {"operations": [{"op": "add", "path": "/1", "value": new}]},
            format="json",
            **if_match_stored(indexed_chat),
        )
    assert response.status_code == 200, response.content
    after = by_index(indexed_chat)
    assert after[1].content == "Mira: A gull screamed."
    assert [after[i].pk for i in (0, 2, 3, 4)] == [before[i].pk for i in (0, 1, 2, 3)]
    assert scripted.embedded_texts() == ["Mira: A gull screamed."]
    assert_deferred_constraints_hold()


def test_reordering_messages_moves_their_memories_without_re_embedding(
    api, indexed_chat, scripted, django_capture_on_commit_callbacks
):
    before = by_index(indexed_chat)
    scripted.forget()
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/v1/chats/{indexed_chat.pk}/patch",
            {"operations": [{"op": "move", "from": "/0", "path": "/3"}]},
            format="json",
            **if_match_stored(indexed_chat),
        )
    assert response.status_code == 200, response.content
    after = by_index(indexed_chat)
    assert [after[i].pk for i in range(4)] == [before[i].pk for i in (1, 2, 3, 0)]
    assert scripted.requests == []
    assert_deferred_constraints_hold()


def test_identical_messages_each_keep_a_memory_through_a_delete_between_them(
    user, api, scripted, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_import(
            user=user, stream=jsonl(("You", "Yes."), ("Mira", "Sure?"), ("You", "Yes."), ("Mira", "Fine."))
        )
    with django_capture_on_commit_callbacks(execute=True):
        api.delete(f"/api/v1/chats/{chat.pk}/messages/1/", **if_match_stored(chat))
    assert [(m.message_index, m.content) for m in message_memories(chat)] == [
        (0, "You: Yes."),
        (1, "You: Yes."),
        (2, "Mira: Fine."),
    ]
    # Identical text is embedded once, whichever message it came from.
    assert scripted.embedded_texts().count("You: Yes.") == 1
    assert_deferred_constraints_hold()


def test_a_doubled_index_task_does_nothing(indexed_chat, scripted):
    before = {m.pk: _vector(m) for m in message_memories(indexed_chat)}
    scripted.forget()
    assert tasks.index_chat(indexed_chat.pk) == {
        "created": 0,
        "moved": 0,
        "deleted": 0,
        "changed_from": None,
        "embedding_runs": 0,
    }
    assert {m.pk: _vector(m) for m in message_memories(indexed_chat)} == before
    assert scripted.requests == []


def test_an_index_task_with_nothing_of_its_chat_to_embed_embeds_the_users_other_backlog(user, indexed_chat, scripted):
    # A fact left without a vector (its provider was down when it was made).
    character = indexed_chat.characters.get()
    fact = Memory.objects.create(
        user=user, character=character, kind="fact", content="Corvin fears heights.", content_hash="f" * 64
    )
    counts = tasks.index_chat(indexed_chat.pk)
    assert counts["created"] == 0 and counts["embedding_runs"] == 1
    assert Memory.objects.get(pk=fact.pk).embedding_model == "openai:scripted"


def test_an_index_task_for_a_deleted_chat_does_nothing(db):
    assert tasks.index_chat(10**9) == {}


def test_deleting_a_chat_removes_its_memories_but_not_its_characters(
    api, user, indexed_chat, django_capture_on_commit_callbacks
):
    character = indexed_chat.characters.get()
    with django_capture_on_commit_callbacks(execute=True):
        kept = memory_create(user=user, character=character, kind="fact", content="Corvin fears heights.")
        memory_create(user=user, chat=indexed_chat, kind="summary", content="The lantern went out; Corvin relit it.")
    assert api.delete(f"/api/v1/chats/{indexed_chat.pk}/").status_code == 204
    assert list(Memory.objects.filter(user=user)) == [kept]


# ---------------------------------------------------------------------------------------------------- progress


def test_chat_detail_reports_pending_messages_until_indexed(api, user, scripted):
    # A plain transaction: the on-commit task never runs, as when the broker is slow.
    chat = _import(api, ("Mira", "One."), ("You", ""), ("You", "Two."), ("Mira", "Three."))
    body = api.get(f"/api/v1/chats/{chat.pk}/").json()
    assert (body["indexed_messages"], body["pending"]) == (0, 3)

    tasks.index_chat(chat.pk)
    body = api.get(f"/api/v1/chats/{chat.pk}/").json()
    assert (body["indexed_messages"], body["pending"]) == (3, 0)
    assert chat_index_progress(chat=chat) == {"indexable_messages": 3, "indexed_messages": 3, "pending": 0}


def test_an_edit_counts_as_pending_until_reindexed(api, indexed_chat):
    api.patch(
        f"/api/v1/chats/{indexed_chat.pk}/messages/0/",
        {"mes": "Dark."},
        format="json",
        **if_match_stored(indexed_chat),
    )
    assert chat_index_progress(chat=indexed_chat)["pending"] == 1


def test_the_sweep_indexes_chats_whose_task_was_lost(user, scripted):
    chat = chat_import(user=user, stream=jsonl(("Mira", "Lost task."), ("You", "Found.")))
    assert message_memories(chat) == []
    assert tasks.sweep()["chats"] >= 1
    assert [m.content for m in message_memories(chat)] == ["Mira: Lost task.", "You: Found."]
    assert chat_index_progress(chat=chat)["pending"] == 0


# -------------------------------------------------------------------------------------------- model changes


def test_switching_model_re_embeds_every_memory_of_the_user_under_the_new_key(
    user, other_user, indexed_chat, scripted, django_capture_on_commit_callbacks
):
    character = indexed_chat.characters.get()
    with django_capture_on_commit_callbacks(execute=True):
        fact = memory_create(user=user, character=character, kind="fact", content="Corvin keeps the matches.")
        other = chat_import(user=other_user, stream=jsonl(("Mira", "Someone else's chat.")))
    assert Memory.objects.get(pk=fact.pk).embedding_model == MODEL_KEY
    scripted.forget()

    with django_capture_on_commit_callbacks(execute=True):
        embedding_settings_set(
            user=user, provider="openai", model="second", base_url=f"{scripted.url}/v1", api_key="k"
        )

    mine = list(Memory.objects.filter(user=user))
    assert len(mine) == 5
    for memory in mine:
        _assert_embedded(memory, scripted, model="second")
    assert {r.model for r in scripted.requests} == {"second"}
    assert sorted(scripted.embedded_texts()) == sorted(m.content for m in mine)
    assert {r.authorization for r in scripted.requests} == {"Bearer k"}
    # Another user's vectors stay where they were.
    assert {m.embedding_model for m in message_memories(other)} == {MODEL_KEY}


def test_after_a_model_switch_the_old_vectors_count_as_pending(user, indexed_chat, scripted):
    embedding_settings_set(user=user, provider="openai", model="second", base_url=f"{scripted.url}/v1")
    assert chat_index_progress(chat=indexed_chat)["pending"] == 4
    tasks.embed_pending(user.pk)
    assert chat_index_progress(chat=indexed_chat)["pending"] == 0


def test_the_sweep_re_embeds_a_user_whose_model_switch_task_was_lost(user, indexed_chat, scripted):
    # The switch commits but its task is lost (this transaction never commits, so on_commit never fires).
    embedding_settings_set(user=user, provider="openai", model="second", base_url=f"{scripted.url}/v1")
    assert tasks.sweep()["users"] == 1
    assert {m.embedding_model for m in message_memories(indexed_chat)} == {"openai:second"}


def test_switching_to_no_embeddings_leaves_vectors_alone_and_counts_text_as_indexed(user, indexed_chat, scripted):
    scripted.forget()
    embedding_settings_set(user=user, provider="none")
    assert tasks.embed_pending(user.pk) == 0
    assert scripted.requests == []
    assert chat_index_progress(chat=indexed_chat)["pending"] == 0


def _changed_from(chat) -> int | None:
    return MemoryScope.objects.get(chat=chat).changed_from


def test_indexing_notes_the_first_changed_message_for_extraction_but_not_appends(
    api, indexed_chat, scripted, django_capture_on_commit_callbacks
):
    chat = indexed_chat
    assert _changed_from(chat) is None  # an import is all appends
    message = {"name": "Mira", "is_user": False, "mes": "The tide turned.", "extra": {}}
    with django_capture_on_commit_callbacks(execute=True):
        api.post(f"/api/v1/chats/{chat.pk}/append", {"messages": [message]}, format="json", **if_match_stored(chat))
    assert _changed_from(chat) is None
    with django_capture_on_commit_callbacks(execute=True):
        api.patch(
            f"/api/v1/chats/{chat.pk}/messages/3/",
            {"mes": "Brave, foolish man."},
            format="json",
            **if_match_stored(chat),
        )
    assert _changed_from(chat) == 3
    with django_capture_on_commit_callbacks(execute=True):
        api.delete(f"/api/v1/chats/{chat.pk}/messages/1/", **if_match_stored(chat))
    assert _changed_from(chat) == 1  # the lowest change since extraction last took it
    MemoryScope.objects.filter(chat=chat).update(changed_from=None)
    with django_capture_on_commit_callbacks(execute=True):
        api.patch(
            f"/api/v1/chats/{chat.pk}/messages/0/", {"extra": {"note": "x"}}, format="json", **if_match_stored(chat)
        )
    assert _changed_from(chat) is None  # extension data is not the message's text


def test_a_chats_progress_hashes_each_message_once_while_its_statistics_are_stale(user, scripted):
    # An import's rows are not analysed yet (here never): the planner estimates the chat at one row. A join of
    # messages to memories, or a lookup per message, then read every memory of the chat once per message: 114-175 ms
    # a look at a 663-message chat's progress (bench/locomo_speed.py prints the looks).
    chat = chat_import(user=user, stream=jsonl(*[("Mira" if n % 2 else "You", f"Line {n}.") for n in range(120)]))
    tasks.index_chat(chat.pk)
    with CaptureQueriesContext(connection) as queries:
        assert chat_index_progress(chat=chat) == {"indexable_messages": 120, "indexed_messages": 120, "pending": 0}
    (sql,) = [q["sql"] for q in queries.captured_queries if "sha256" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # Each message's row read once (its text hashed once), and each memory's: never once a pair.
    loops = [int(line.rsplit("loops=", 1)[1].rstrip(")")) for line in plan.splitlines() if "loops=" in line]
    assert max(loops) == 1, plan
