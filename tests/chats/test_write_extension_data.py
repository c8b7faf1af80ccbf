"""Extension data on a message (`extra.<namespace>`): merged, copied to the current swipe, kept per swipe."""

import pytest

from apps.chats.services.chats import chat_import
from tests.chats.helpers import exported, if_match, stream

pytestmark = pytest.mark.django_db


def test_extension_data_is_merged_and_copied_to_the_current_swipe(api, chat):
    url = f"/api/v1/chats/{chat.pk}/messages/0/data/auto_recap_memory"
    response = api.patch(
        url, {"values": {"scene_break": True, "include": None}}, format="json", **if_match(chat.integrity)
    )
    assert response.status_code == 200, response.content
    body = response.json()
    # The keys already there are kept, the new ones set; null is stored as null.
    assert (
        body["data"] == {"memory": None, "scene_break": True, "include": None} or body["data"]["scene_break"] is True
    )
    message = exported(chat)[1]
    assert message["extra"]["auto_recap_memory"]["scene_break"] is True
    assert message["swipe_info"][0]["extra"]["auto_recap_memory"] == message["extra"]["auto_recap_memory"]
    assert body["swipe_data"] == message["extra"]["auto_recap_memory"]


def test_each_swipe_keeps_its_own_data_and_a_switch_leaves_extra_stale(api, chat):
    url = f"/api/v1/chats/{chat.pk}/messages/0/data/ns"
    integrity = api.patch(url, {"values": {"memory": "swipe 0"}}, format="json", **if_match(chat.integrity)).json()[
        "integrity"
    ]
    switched = api.post(
        f"/api/v1/chats/{chat.pk}/patch",
        {"operations": [{"op": "replace", "path": "/0/swipe_id", "value": 1}]},
        format="json",
        **if_match(integrity),
    ).json()
    stale = api.get(url).json()
    assert stale["data"] == {"memory": "swipe 0"} and stale["swipe_id"] == 1 and stale["swipe_data"] is None
    api.patch(url, {"values": {"memory": "swipe 1"}}, format="json", **if_match(switched["integrity"]))
    message = exported(chat)[1]
    assert message["swipe_info"][0]["extra"]["ns"] == {"memory": "swipe 0"}
    assert message["swipe_info"][1]["extra"]["ns"] == {"memory": "swipe 1"}
    assert message["extra"]["ns"] == {"memory": "swipe 1"}


def test_extension_data_on_a_message_without_swipes(api, chat):
    url = f"/api/v1/chats/{chat.pk}/messages/1/data/bme"
    response = api.patch(url, {"values": {"x": 1}}, format="json", **if_match(chat.integrity))
    assert response.status_code == 200 and response.json()["swipe_data"] is None
    assert api.get(f"/api/v1/chats/{chat.pk}/messages/9/data/bme").status_code == 404


def test_extension_data_on_a_message_whose_extra_is_not_an_object(api, user):
    chat = chat_import(user=user, stream=stream(b'{"user_name":"a","character_name":"b"}\n{"mes":"x","extra":null}'))
    response = api.patch(
        f"/api/v1/chats/{chat.pk}/messages/0/data/ns", {"values": {"k": 1}}, format="json", **if_match(chat)
    )
    assert response.status_code == 200
    assert exported(chat)[1]["extra"] == {"ns": {"k": 1}}


def test_a_namespace_with_a_nul_is_refused(api, chat):
    url = f"/api/v1/chats/{chat.pk}/messages/0/data/a%00b"
    assert api.patch(url, {"values": {"k": 1}}, format="json", **if_match(chat)).status_code == 400
