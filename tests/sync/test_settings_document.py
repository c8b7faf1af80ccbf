"""The user's settings document: merge and JSON Patch, namespaced keys, one document per user."""

import json

import pytest

from tests.chats.helpers import if_match

pytestmark = pytest.mark.django_db


def test_settings_document_merge_and_json_patch(api):
    first = api.get("/api/v1/settings")
    assert first.json()["settings"] == {}
    merged = api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps({"smartMemory": {"budget": 500, "slots": {"a": 1}}}),
        content_type="application/merge-patch+json",
        **if_match(first.json()["integrity"]),
    )
    assert merged.status_code == 200
    patched = api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps([{"op": "replace", "path": "/smartMemory/budget", "value": 600}]),
        content_type="application/json-patch+json",
        **if_match(merged.json()["integrity"]),
    )
    assert patched.json()["settings"] == {"smartMemory": {"budget": 600, "slots": {"a": 1}}}
    stale = api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps({"x": {}}),
        content_type="application/merge-patch+json",
        **if_match(merged.json()["integrity"]),
    )
    assert stale.status_code == 409 and stale.json()["error"] == "integrity"


def test_settings_must_stay_namespaced(api):
    integrity = api.get("/api/v1/settings").json()["integrity"]
    response = api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps({"budget": 5}),
        content_type="application/merge-patch+json",
        **if_match(integrity),
    )
    assert response.status_code == 400 and response.json()["extra"]["field"] == "settings"


def test_settings_are_per_user(api, other_api):
    integrity = api.get("/api/v1/settings").json()["integrity"]
    api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps({"mine": {"secret": 1}}),
        content_type="application/merge-patch+json",
        **if_match(integrity),
    )
    assert other_api.get("/api/v1/settings").json()["settings"] == {}
