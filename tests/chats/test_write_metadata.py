"""A chat's metadata over the API: JSON Merge Patch (a deep merge) and JSON Patch, refused patches that change
nothing, and If-Match."""

import json

import pytest

from tests.chats.helpers import exported, fresh, if_match

pytestmark = pytest.mark.django_db


def test_merge_patch_is_a_true_deep_merge(api, chat):
    url = f"/api/v1/chats/{chat.pk}/metadata"
    patch = {"smartMemory": {"nested": {"deep": None, "added": 1}}, "attachments": ["a"], "tainted": None}
    response = api.generic(
        "PATCH", url, json.dumps(patch), content_type="application/merge-patch+json", **if_match(chat.integrity)
    )
    assert response.status_code == 200, response.content
    metadata = response.json()["chat_metadata"]
    assert metadata["smartMemory"] == {"v": 7, "nested": {"added": 1}}  # v untouched, deep deleted
    assert metadata["attachments"] == ["a"] and "tainted" not in metadata
    assert metadata["note_prompt"] == "Remember the 🗝️"
    assert exported(chat)[0]["chat_metadata"] == metadata


def test_json_patch_on_metadata(api, chat):
    ops = [{"op": "add", "path": "/smartMemory/v", "value": 8}, {"op": "test", "path": "/note_depth", "value": 4}]
    response = api.generic(
        "PATCH",
        f"/api/v1/chats/{chat.pk}/metadata",
        json.dumps(ops),
        content_type="application/json-patch+json",
        **if_match(chat.integrity),
    )
    assert response.status_code == 200 and response.json()["chat_metadata"]["smartMemory"]["v"] == 8


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        ('[{"op": "test", "path": "/note_depth", "value": 5}]', "application/json-patch+json", 409),
        ('[{"op": "nope", "path": "/x"}]', "application/json-patch+json", 400),
        ('"a string"', "application/merge-patch+json", 400),
        ('{"a": ', "application/merge-patch+json", 400),
        ('[{"op": "replace", "path": "", "value": [1]}]', "application/json-patch+json", 400),
    ],
)
def test_bad_metadata_patches_change_nothing(api, chat, body, content_type, status):
    response = api.generic(
        "PATCH", f"/api/v1/chats/{chat.pk}/metadata", body, content_type=content_type, **if_match(chat.integrity)
    )
    assert response.status_code == status
    assert fresh(chat).chat_metadata == chat.chat_metadata


def test_metadata_patch_needs_if_match(api, chat):
    response = api.generic(
        "PATCH", f"/api/v1/chats/{chat.pk}/metadata", "{}", content_type="application/merge-patch+json"
    )
    assert response.status_code == 428
