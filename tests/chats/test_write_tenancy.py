"""The chat write and sync endpoints answer 404 for another user's chat and change nothing."""

import pytest

from tests.chats.helpers import exported, if_match

pytestmark = pytest.mark.django_db


def test_sync_endpoints_are_404_for_other_users(other_api, chat):
    base = f"/api/v1/chats/{chat.pk}"
    h = if_match(chat.integrity)
    assert other_api.get(f"{base}/delta").status_code == 404
    assert other_api.get(f"{base}/metadata").status_code == 404
    assert other_api.get(f"{base}/revisions/").status_code == 404
    assert other_api.get(f"{base}/messages/0/data/ns").status_code == 404
    assert (
        other_api.post(
            f"{base}/patch", {"operations": [{"op": "remove", "path": "/0"}]}, format="json", **h
        ).status_code
        == 404
    )
    assert (
        other_api.post(f"{base}/save", {"chat": [{"user_name": "x"}], "force": True}, format="json").status_code == 404
    )
    assert other_api.patch(f"{base}/messages/0/data/ns", {"values": {"a": 1}}, format="json", **h).status_code == 404
    assert exported(chat)[1]["mes"].startswith("*She smiles.*")
