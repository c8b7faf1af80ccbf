"""Bounds on what one request may make the server do: a JSON Patch writes at most a request body's worth (copies
cannot double a document at every operation), every list in every API input has a documented bound, and a sync
push that names a uid held elsewhere is refused without saying by what."""

import json
import threading
import time
import uuid

import pytest
from django.conf import settings as django_settings
from drf_spectacular.generators import SchemaGenerator

from apps.accounts.models import SettingsDocument
from apps.chats.models import Chat
from apps.chats.services.chats import chat_import
from apps.memories.models import Entity, Memory
from apps.memories.services.indexing import chat_index_messages
from apps.memories.services.memories import memory_create
from apps.sync.models import FeedEntry, Instance
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import exported, if_match
from tests.memories.helpers import jsonl, message_memories

pytestmark = pytest.mark.django_db


# ----------------------------------------------------------------------------------------------- JSON Patch


SEED = {"v": "x" * 64}


def _doubling(base: str) -> list[dict]:
    """A value, then 20 copies of it into itself: each doubles it (64 bytes would end above 60 MB)."""
    ops = [{"op": "add", "path": f"{base}/a", "value": SEED}]
    ops += [{"op": "copy", "from": f"{base}/a", "path": f"{base}/a/k{i}"} for i in range(1, 21)]
    return ops


def _first_over_the_limit(ops: list[dict]) -> int:
    """The operation at which the bytes written (the added value, then each copy of the value as it is then)
    pass the body limit."""
    size = len(json.dumps(SEED, separators=(",", ":")))
    written = size
    for index in range(1, len(ops)):
        written += size
        if written > django_settings.LOREKEEPER_MAX_JSON_BYTES:
            return index
        size = 2 * size + len(f',"k{index}":')
    raise AssertionError("the patch never passes the limit")


def test_doubling_copies_in_a_chat_patch_are_refused_and_nothing_changes(api, chat):
    before, integrity = exported(chat), Chat.objects.get(pk=chat.pk).integrity
    ops = _doubling("/1/extra")
    body = json.dumps({"operations": ops})
    assert len(body) < 2000  # a small request…

    response = api.post(f"/api/v1/chats/{chat.pk}/patch", body, content_type="application/json", **if_match(chat))

    assert response.status_code == 413, response.content  # …refused before it writes its tens of MB
    answer = response.json()
    assert answer["error"] == "patch_too_large" and answer["operation"] == _first_over_the_limit(ops)
    assert answer["max_bytes"] == django_settings.LOREKEEPER_MAX_JSON_BYTES
    assert exported(chat) == before and Chat.objects.get(pk=chat.pk).integrity == integrity


def test_doubling_copies_in_a_metadata_patch_are_refused_and_nothing_changes(api, chat):
    before = Chat.objects.get(pk=chat.pk)
    ops = _doubling("")

    response = api.patch(
        f"/api/v1/chats/{chat.pk}/metadata",
        json.dumps(ops),
        content_type="application/json-patch+json",
        **if_match(chat),
    )

    assert response.status_code == 413, response.content
    assert response.json()["error"] == "patch_too_large" and response.json()["operation"] == _first_over_the_limit(ops)
    after = Chat.objects.get(pk=chat.pk)
    assert (after.chat_metadata, after.integrity) == (before.chat_metadata, before.integrity)


def test_doubling_copies_in_a_settings_patch_are_refused_and_nothing_changes(api, user):
    api.get("/api/v1/settings")
    before = SettingsDocument.objects.get(user=user)
    ops = _doubling("")

    response = api.patch(
        "/api/v1/settings",
        json.dumps(ops),
        content_type="application/json-patch+json",
        HTTP_IF_MATCH=f'"{before.integrity}"',
    )

    assert response.status_code == 413, response.content
    assert response.json()["error"] == "patch_too_large" and response.json()["operation"] == _first_over_the_limit(ops)
    after = SettingsDocument.objects.get(user=user)
    assert (after.data, after.integrity) == (before.data, before.integrity)


def test_moving_a_large_value_back_and_forth_is_not_counted_as_writing(api, chat, settings):
    settings.LOREKEEPER_MAX_JSON_BYTES = 4000
    big = "y" * 1500
    ops = [{"op": "add", "path": "/1/extra/a", "value": big}]
    ops += [
        {"op": "move", "from": "/1/extra/a", "path": "/1/extra/b"},
        {"op": "move", "from": "/1/extra/b", "path": "/1/extra/a"},
    ] * 5

    response = api.post(f"/api/v1/chats/{chat.pk}/patch", {"operations": ops}, format="json", **if_match(chat))

    assert response.status_code == 200, response.content
    assert exported(chat)[2]["extra"]["a"] == big


def test_merge_patches_cannot_grow_metadata_past_the_body_limit(api, chat, settings):
    settings.LOREKEEPER_MAX_JSON_BYTES = len(json.dumps(chat.chat_metadata, ensure_ascii=False).encode()) + 1000
    url = f"/api/v1/chats/{chat.pk}/metadata"
    first = api.patch(url, {"one": "a" * 600}, format="json", **if_match(chat))
    assert first.status_code == 200, first.content
    before = Chat.objects.get(pk=chat.pk)

    second = api.patch(url, {"two": "b" * 600}, format="json", **if_match(before))

    assert second.status_code == 413 and second.json()["error"] == "patch_too_large"
    after = Chat.objects.get(pk=chat.pk)
    assert (after.chat_metadata, after.integrity) == (before.chat_metadata, before.integrity)


# --------------------------------------------------------------------------------------------- list bounds


def _arrays(node, where: str, components: dict, seen: frozenset = frozenset()):
    """Every array schema under `node` (following $refs), with where it is."""
    if isinstance(node, dict):
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                yield from _arrays(components[name], f"{where} -> {name}", components, seen | {name})
            return
        if node.get("type") == "array":
            yield where, node
        for key, value in node.items():
            yield from _arrays(value, f"{where}.{key}", components, seen)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _arrays(value, f"{where}[{i}]", components, seen)


def test_every_array_in_every_api_input_has_a_bound():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    inputs = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            inputs += _arrays(operation.get("requestBody", {}), where, components)
            for parameter in operation.get("parameters", []):
                inputs += _arrays(parameter, f"{where} ?{parameter['name']}", components)
    assert len(inputs) > 10  # the walk finds the API's lists (patch operations, push changes, entities, tags…)
    unbounded = [where for where, array in inputs if "maxItems" not in array]
    assert unbounded == []
    push = components["SyncPushInputRequest"]["properties"]["changes"]
    assert push["maxItems"] == 1000


def _create(character, uid=None, **data) -> dict:
    return {
        "type": "memory",
        "op": "create",
        "uid": str(uid or uuid.uuid4()),
        "clock": {"laptop": 1},
        "data": {"kind": "fact", "content": "Mira keeps a lantern.", "character": str(character.uid), **data},
    }


def test_a_push_with_too_many_entities_on_a_memory_is_a_400_naming_the_field(api, character):
    entities = [{"name": f"Entity {i}"} for i in range(51)]
    body = {"instance": "laptop", "changes": [_create(character), _create(character, entities=entities)]}

    response = api.post("/api/v1/sync/push", body, format="json")

    assert response.status_code == 400, response.content
    assert "entities" in response.json()["changes"]["1"]["data"]
    assert not Memory.objects.exists() and not Entity.objects.exists() and not Instance.objects.exists()


def test_a_push_naming_too_many_entities_in_all_is_a_400_and_stores_nothing(api, character):
    # 50 each, allowed, but 41 of them name more than a push may (each entity costs queries under the push lock).
    changes = [_create(character, entities=[{"name": f"Entity {c}.{i}"} for i in range(50)]) for c in range(41)]

    response = api.post("/api/v1/sync/push", {"instance": "laptop", "changes": changes}, format="json")

    assert response.status_code == 400, response.content
    assert "2000 entities" in response.json()["changes"][0]
    assert not Memory.objects.exists() and not Entity.objects.exists() and not Instance.objects.exists()


def test_a_push_with_fifty_entities_on_a_memory_is_applied(api, character):
    entities = [{"name": f"Entity {i}"} for i in range(50)]
    response = api.post(
        "/api/v1/sync/push", {"instance": "laptop", "changes": [_create(character, entities=entities)]}, format="json"
    )
    assert response.status_code == 200, response.content
    assert Memory.objects.get().entities.count() == 50


# ------------------------------------------------------------------------------------ uids held elsewhere


def _message_memory(user, django_capture_on_commit_callbacks) -> Memory:
    chat = chat_import(user=user, stream=jsonl(("Mira", "Hello there.")))
    chat_index_messages(chat_id=chat.pk)
    return message_memories(chat)[0]


def _snapshot():
    memories = sorted(Memory.objects.values_list("uid", "user_id", "kind", "content", "version", "status"))
    return memories, sorted(FeedEntry.objects.values_list("uid", "user_id", "deleted_at", "clock"))


def test_a_push_create_under_a_uid_held_elsewhere_is_one_generic_409(
    api, user, other_user, character, django_capture_on_commit_callbacks
):
    mine = _message_memory(user, django_capture_on_commit_callbacks)
    theirs = _message_memory(other_user, django_capture_on_commit_callbacks)
    their_character = CharacterFactory(user=other_user, name="Corvin")
    their_fact = memory_create(user=other_user, character=their_character, kind="fact", content="Corvin rows.")
    before = _snapshot()

    answers = []
    for uid in (mine.uid, theirs.uid, their_fact.uid):
        body = {"instance": "laptop", "changes": [_create(character), _create(character, uid=uid)]}
        response = api.post("/api/v1/sync/push", body, format="json")
        assert response.status_code == 409, response.content
        answers.append(response.json())
    takeover = {"type": "character", "op": "create", "uid": str(their_character.uid), "clock": {"laptop": 1}}
    takeover["data"] = {"name": "Mine now"}
    response = api.post(
        "/api/v1/sync/push", {"instance": "laptop", "changes": [_create(character), takeover]}, format="json"
    )
    assert response.status_code == 409, response.content
    answers.append(response.json())

    expected = {
        "error": "uid_unavailable",
        "message": "Change 1: this uid cannot be used; give the object a new one.",
        "field": "changes[1].uid",
    }
    assert answers == [expected] * 4  # the same whoever holds it, and whatever it is
    assert _snapshot() == before  # the first change of each push went too: all or none


def test_a_push_create_under_a_fresh_uid_after_a_refusal_is_applied(
    api, user, character, django_capture_on_commit_callbacks
):
    mine = _message_memory(user, django_capture_on_commit_callbacks)
    assert (
        api.post(
            "/api/v1/sync/push", {"instance": "laptop", "changes": [_create(character, uid=mine.uid)]}, format="json"
        ).status_code
        == 409
    )
    response = api.post("/api/v1/sync/push", {"instance": "laptop", "changes": [_create(character)]}, format="json")
    assert response.status_code == 200 and response.json()["results"][0]["result"] == "applied"


def test_an_update_of_another_users_uid_answers_as_a_uid_nobody_holds(api, other_user, character):
    their_character = CharacterFactory(user=other_user, name="Corvin")
    their_fact = memory_create(user=other_user, character=their_character, kind="fact", content="Corvin rows.")
    before = _snapshot()

    def update(kind: str, uid) -> dict:
        change = {"type": kind, "op": "update", "uid": str(uid), "clock": {"laptop": 3}, "data": {}}
        change["data"] = {"content": "Mine now."} if kind == "memory" else {"name": "Mine now"}
        response = api.post("/api/v1/sync/push", {"instance": "laptop", "changes": [change]}, format="json")
        assert response.status_code == 200, response.content
        (outcome,) = response.json()["results"]
        return {key: value for key, value in outcome.items() if key != "uid"}

    assert update("memory", their_fact.uid) == update("memory", uuid.uuid4())
    assert update("character", their_character.uid) == update("character", uuid.uuid4())
    assert _snapshot() == before


@pytest.mark.django_db(transaction=True)
def test_a_uid_another_account_commits_meanwhile_is_a_409_not_a_500(api, other_user, character):
    """The other account's push is still open when ours looks for the uid, and commits while ours writes it."""
    from django.db import transaction

    from tests.sync.instances import change, push

    uid = uuid.uuid4()
    corvin = CharacterFactory(user=other_user, name="Corvin")
    started, result = threading.Event(), {}

    def theirs() -> None:
        try:
            with transaction.atomic():
                push(
                    other_user,
                    "desk",
                    change("create", uid, {"desk": 1}, kind="fact", content="x", character=corvin.uid),
                )
                started.set()
                time.sleep(1.0)  # ours reaches its insert meanwhile, and waits on the uid's index
        finally:
            connection.close()

    from django.db import connection

    thread = threading.Thread(target=theirs)
    thread.start()
    started.wait(10)
    result["response"] = api.post(
        "/api/v1/sync/push", {"instance": "laptop", "changes": [_create(character, uid=uid)]}, format="json"
    )
    thread.join()
    assert result["response"].status_code == 409, result["response"].content
    assert result["response"].json()["error"] == "uid_unavailable"
    assert Memory.objects.get(uid=uid).user_id == other_user.pk
