"""Ids a client writes (apps/common/ids.py): a number past what any id column holds, past the 4,300
digits int() reads too, is no id, and the pages and parsers that read one answer as for any other unknown id."""

import pytest

from apps.chats.models import Character, Chat
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.common.ids import id_from
from apps.llm.services import connection_create

pytestmark = pytest.mark.django_db

LONG = "9" * 5000


@pytest.mark.parametrize(
    "text, expected",
    [("12", 12), ("0", 0), ("9" * 18, int("9" * 18)), ("9" * 19, None), (LONG, None), ("-1", None), ("²", None),
     (" 1", None), ("1\n", None), ("", None), ("١٢", None)],
)  # fmt: skip
def test_an_id_is_one_to_eighteen_ascii_digits(text, expected):
    assert id_from(text) == expected


def test_pages_given_a_number_past_any_id_answer_as_for_an_unknown_one(web, user, character):
    chat = chat_create(user=user, title="Ids", character_ids=[character.pk])
    chat_append(chat=chat, messages=[{"name": "You", "is_user": True, "mes": "Hello"}], integrity=chat.integrity)
    assert web.get(f"/memories/entities/?character={LONG}").status_code == 400
    for page in ("/lorebooks/search/?q=x&", "/lorebooks/from-memories/?"):
        for field in ("character", "chat"):
            assert web.get(f"{page}{field}={LONG}").status_code == 404
    assert web.get(f"/chats/{chat.pk}/messages/0/recall/graph/m{LONG}/").status_code == 404
    assert web.get(f"/chats/{chat.pk}/messages/0/recall/graph/e{LONG}/").status_code == 404
    connection = connection_create(user=user, name="local", base_url="http://127.0.0.1:9/v1", model="m")
    assert web.post(f"/llm/{connection.pk}/presets/apply/", {"preset": LONG}).status_code == 404
    other = Character.objects.create(user=user, name="Rowan")
    group = {"characters": [LONG, str(character.pk), str(other.pk)], "reply_order": "natural"}
    started = web.post("/characters/group-chat/", group)  # a choice not offered: the form says so, nothing starts
    assert started.status_code == 302 and started["Location"] == "/characters/"
    assert Chat.objects.filter(user=user).count() == 1
    group["characters"] = group["characters"][1:]
    assert web.post("/characters/group-chat/", group).status_code == 302
    assert Chat.objects.filter(user=user).count() == 2
