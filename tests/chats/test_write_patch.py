import json

import pytest

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_import
from apps.chats.services.patch import chat_patch
from tests.chats.helpers import exported, if_match, stream

pytestmark = pytest.mark.django_db


def _patch(api, chat, operations, integrity=None):
    return api.post(
        f"/api/v1/chats/{chat.pk}/patch",
        {"operations": operations},
        format="json",
        **if_match(integrity or Chat.objects.get(pk=chat.pk).integrity),
    )


def test_field_edits_inside_messages(api, chat):
    expected = exported(chat)
    ops = [
        {"op": "replace", "path": "/1/mes", "value": "Edited"},
        {"op": "add", "path": "/0/swipes/-", "value": "A fourth swipe"},
        {"op": "add", "path": "/2/extra/my_ext", "value": {"k": 1}},
        {"op": "add", "path": "/2/extra/my_ext/k2", "value": [1, 2]},
        {"op": "remove", "path": "/1/force_avatar"},
        {"op": "test", "path": "/0/swipe_id", "value": 0},
    ]
    response = _patch(api, chat, ops)
    assert response.status_code == 200, response.content
    assert response.json()["applied"] == 6 and response.json()["total_messages"] == 3
    expected[2]["mes"] = "Edited"
    expected[1]["swipes"].append("A fourth swipe")
    expected[3]["extra"]["my_ext"] = {"k": 1, "k2": [1, 2]}
    del expected[2]["force_avatar"]
    assert exported(chat) == expected


def test_whole_message_add_remove_move_copy_keep_indices_contiguous(api, chat):
    lines = exported(chat)
    header, m0, m1, m2 = lines
    new = {"name": "Narrator", "is_user": False, "is_system": True, "mes": "Meanwhile…", "extra": {}}
    ops = [
        {"op": "add", "path": "/1", "value": new},  # m0 new m1 m2
        {"op": "remove", "path": "/3"},  # m0 new m1
        {"op": "move", "from": "/0", "path": "/2"},  # new m1 m0
        {"op": "copy", "from": "/1", "path": "/-"},  # new m1 m0 m1
        {"op": "replace", "path": "/0/mes", "value": "Later…"},
    ]
    assert _patch(api, chat, ops).status_code == 200
    assert exported(chat) == [header, {**new, "mes": "Later…"}, m1, m0, m1]
    assert list(Message.objects.filter(chat=chat).order_by("index").values_list("index", flat=True)) == [0, 1, 2, 3]
    assert Chat.objects.get(pk=chat.pk).message_count == 4


def test_an_add_of_the_message_already_there_is_skipped(api, chat):
    lines = exported(chat)
    response = _patch(api, chat, [{"op": "add", "path": "/1", "value": lines[2]}])
    assert response.json()["applied"] == 0 and response.json()["skipped"] == 1
    assert response.json()["integrity"] == str(chat.integrity)  # nothing changed, so the integrity stays
    assert exported(chat) == lines


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "replace", "path": "/1/mes", "value": "x"}, {"op": "test", "path": "/0/mes", "value": "nope"}],
        [{"op": "replace", "path": "/9/mes", "value": "x"}],
        [{"op": "add", "path": "/4", "value": {"mes": "x"}}],
        [{"op": "remove", "path": "/1/no_such_field"}],
        [{"op": "add", "path": "/0/swipes/7", "value": "x"}],
    ],
)
def test_conflicting_patch_answers_409_and_applies_nothing(api, chat, ops):
    before = exported(chat)
    response = _patch(api, chat, ops)
    assert response.status_code == 409
    assert response.json()["error"] == "patch_conflict" and response.json()["operation"] == len(ops) - 1
    assert exported(chat) == before and Chat.objects.get(pk=chat.pk).integrity == chat.integrity


@pytest.mark.parametrize(
    ("ops", "bad"),
    [
        ([{"op": "frobnicate", "path": "/1"}], 0),
        ([{"op": "replace", "path": "/1/mes", "value": "ok"}, {"op": "add", "path": "1/mes", "value": "x"}], 1),
        ([{"op": "add", "path": "/1/mes"}], 0),
        ([{"op": "add", "path": "/1", "value": "not a message"}], 0),
        ([{"op": "replace", "path": "", "value": []}], 0),
        ([{"op": "add", "path": "/1/x~2", "value": 1}], 0),
        (["not an object"], 0),
    ],
)
def test_malformed_operation_answers_400_naming_it(api, chat, ops, bad):
    before = exported(chat)
    response = _patch(api, chat, ops)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "patch_invalid" and response.json()["operation"] == bad
    assert exported(chat) == before


def test_patch_with_a_stale_integrity_is_409(api, chat):
    stale = chat.integrity
    _patch(api, chat, [{"op": "replace", "path": "/1/mes", "value": "first"}])
    response = _patch(api, chat, [{"op": "replace", "path": "/1/mes", "value": "second"}], integrity=stale)
    assert response.status_code == 409 and response.json()["error"] == "integrity"
    assert exported(chat)[2]["mes"] == "first"


def test_oversized_body_answers_413(api, chat, settings):
    settings.LOREKEEPER_MAX_JSON_BYTES = 1000
    response = _patch(api, chat, [{"op": "replace", "path": "/1/mes", "value": "x" * 2000}])
    assert response.status_code == 413
    assert exported(chat)[2]["mes"] != "x" * 2000


def test_patch_request_for_one_edit_is_small(chat):

    body = json.dumps({"operations": [{"op": "replace", "path": "/1/mes", "value": "A corrected line of dialogue."}]})
    assert len(body) < 200


@pytest.mark.parametrize(
    ("op", "status"),
    [
        ({"op": "test", "path": "/²", "value": 1}, 409),
        ({"op": "test", "path": "/0/swipes/٠", "value": 1}, 409),
        ({"op": "add", "path": "/0/extra/a\u0000b", "value": 1}, 400),
        ({"op": "test", "path": "/2/extra/my_extension/numbers/3", "value": 10**400}, 409),
        # An index past what int() reads (4,300 digits), inside a message: read ahead of the operations, it was a 500.
        ({"op": "replace", "path": "/" + "9" * 5000 + "/mes", "value": "x"}, 409),
        ({"op": "replace", "path": "/²/mes", "value": "x"}, 409),
    ],
)
def test_odd_pointers_and_numbers_answer_4xx(api, chat, op, status):
    before = exported(chat)
    assert _patch(api, chat, [op]).status_code == status
    assert exported(chat) == before


def test_a_patch_of_only_tests_leaves_the_integrity(api, chat):
    response = _patch(api, chat, [{"op": "test", "path": "/0/swipe_id", "value": 0}])
    assert response.json()["applied"] == 1 and response.json()["integrity"] == str(chat.integrity)


def _reference(lines: list[dict], operations: list[dict]) -> list[dict]:
    """What RFC 6902 makes of `lines` (whole messages and their `mes`), applied in Python, one operation at a time."""
    lines = [dict(line) for line in lines]
    for op in operations:
        index = op["path"].split("/")[1]
        if op["op"] == "remove":
            del lines[int(index)]
        elif op["op"] == "add":
            lines.insert(len(lines) if index == "-" else int(index), dict(op["value"]))
        elif op["path"].endswith("/mes"):
            lines[int(index)]["mes"] = op["value"]
        elif op["op"] == "move":
            lines.insert(int(index), lines.pop(int(op["from"].split("/")[1])))
        elif op["op"] == "copy":
            lines.insert(int(index), dict(lines[int(op["from"].split("/")[1])]))
    return lines


def _long_chat(user, count: int) -> Chat:
    lines = [{"name": "Mira" if n % 2 else "You", "is_user": not n % 2, "mes": f"Message {n}."} for n in range(count)]
    data = "\n".join(json.dumps(line) for line in [{"chat_metadata": {}}, *lines]).encode()
    return chat_import(user=user, stream=stream(data), title="Long")


def _messages(chat) -> list[dict]:
    return [{key: line[key] for key in ("name", "is_user", "mes")} for line in exported(chat)[1:]]


NEW = {"name": "Narrator", "is_user": False, "mes": "Meanwhile."}
REMOVALS = {
    "a block, from its end back": [{"op": "remove", "path": f"/{n}"} for n in range(59, 9, -1)],
    "a block, at its start again and again": [{"op": "remove", "path": "/10"}] * 50,
    "scattered, ascending": [{"op": "remove", "path": f"/{n}"} for n in (3, 7, 7, 20, 50, 94)],
    "scattered, descending, then the last": [{"op": "remove", "path": f"/{n}"} for n in (90, 41, 40, 2, 0, 94)],
    "the end of the chat": [{"op": "remove", "path": f"/{n}"} for n in range(99, 79, -1)],
    "removes between reads and writes": [
        {"op": "remove", "path": "/5"},
        {"op": "remove", "path": "/5"},
        {"op": "test", "path": "/5/mes", "value": "Message 7."},
        {"op": "remove", "path": "/30"},
        {"op": "replace", "path": "/6/mes", "value": "Edited."},
        {"op": "remove", "path": "/6"},
        {"op": "remove", "path": "/0"},
        {"op": "add", "path": "/3", "value": NEW},
        {"op": "remove", "path": "/4"},
        {"op": "remove", "path": "/4"},
        {"op": "move", "from": "/50", "path": "/1"},
        {"op": "remove", "path": "/60"},
        {"op": "add", "path": "/-", "value": NEW},
    ],
}


def _new(n: int) -> dict:
    return {"name": "Narrator", "is_user": False, "mes": f"Put back {n}."}


INSERTIONS = {
    "a block, in order": [{"op": "add", "path": f"/{10 + n}", "value": _new(n)} for n in range(50)],
    "a block, each at its start": [{"op": "add", "path": "/10", "value": _new(n)} for n in range(50)],
    "a block at the end, by its index and by /-": [
        *({"op": "add", "path": f"/{100 + n}", "value": _new(n)} for n in range(3)),
        *({"op": "add", "path": "/-", "value": _new(n)} for n in range(3, 6)),
    ],
    "at the start": [{"op": "add", "path": f"/{n}", "value": _new(n)} for n in range(4)],
    "two blocks": [
        *({"op": "add", "path": f"/{5 + n}", "value": _new(n)} for n in range(3)),
        *({"op": "add", "path": f"/{50 + n}", "value": _new(n)} for n in range(3, 6)),
    ],
    "inserts between reads, writes and removes": [
        {"op": "add", "path": "/10", "value": _new(0)},
        {"op": "add", "path": "/11", "value": _new(1)},
        {"op": "test", "path": "/12/mes", "value": "Message 10."},
        {"op": "add", "path": "/12", "value": _new(2)},
        {"op": "replace", "path": "/11/mes", "value": "Edited."},
        {"op": "add", "path": "/13", "value": _new(3)},
        {"op": "remove", "path": "/12"},
        {"op": "add", "path": "/12", "value": _new(4)},
        {"op": "remove", "path": "/30"},
        {"op": "remove", "path": "/30"},
        {"op": "add", "path": "/30", "value": _new(5)},
        {"op": "add", "path": "/31", "value": _new(6)},
        {"op": "move", "from": "/0", "path": "/31"},
        {"op": "add", "path": "/32", "value": _new(7)},
        {"op": "copy", "from": "/31", "path": "/33"},
        {"op": "add", "path": "/34", "value": _new(8)},
    ],
}


@pytest.mark.parametrize("operations", [*REMOVALS.values(), *INSERTIONS.values()],
                         ids=[*REMOVALS.keys(), *INSERTIONS.keys()])  # fmt: skip
def test_removed_and_inserted_messages_leave_the_rest_in_order(api, user, operations):
    chat = _long_chat(user, 100)
    expected = _reference(_messages(chat), operations)
    response = _patch(api, chat, operations)
    assert response.status_code == 200, response.content
    assert _messages(chat) == expected
    indices = list(Message.objects.filter(chat=chat).order_by("index").values_list("index", flat=True))
    assert indices == list(range(len(expected)))
    assert Chat.objects.get(pk=chat.pk).message_count == len(expected) == response.json()["total_messages"]


def test_removes_then_a_failed_test_remove_nothing(api, user):
    chat = _long_chat(user, 40)
    before = exported(chat)
    ops = [{"op": "remove", "path": f"/{n}"} for n in range(30, 9, -1)]
    response = _patch(api, chat, [*ops, {"op": "test", "path": "/9/mes", "value": "Not this."}])
    assert response.status_code == 409, response.content
    assert exported(chat) == before


def test_a_block_of_removes_costs_the_same_few_queries_whatever_its_size(user, django_assert_max_num_queries):
    # A front end deleting a block sends a remove per message: each was a DELETE and an UPDATE of every later row.
    chat = _long_chat(user, 400)
    with django_assert_max_num_queries(8):
        chat_patch(
            chat=chat, operations=[{"op": "remove", "path": f"/{n}"} for n in range(299, 99, -1)],
            integrity=chat.integrity,
        )  # fmt: skip
    assert [line["mes"] for line in _messages(chat)] == [f"Message {n}." for n in (*range(100), *range(300, 400))]


def test_edits_inside_many_messages_read_them_at_once(user, django_assert_max_num_queries):
    chat = _long_chat(user, 200)
    ops = [{"op": "replace", "path": f"/{n}/mes", "value": f"Edited {n}."} for n in range(0, 200, 2)]
    with django_assert_max_num_queries(100 + 8):  # an UPDATE a message edited; they were read one by one
        chat_patch(chat=chat, operations=ops, integrity=chat.integrity)
    assert [line["mes"] for line in _messages(chat)] == [f"Edited {n}." if n % 2 == 0 else f"Message {n}." for n in
                                                         range(200)]  # fmt: skip


def test_edits_read_ahead_then_a_message_removed_address_the_messages_as_they_then_stand(api, user):
    chat = _long_chat(user, 20)
    ops = [
        {"op": "replace", "path": "/5/mes", "value": "First edit of #5."},
        {"op": "remove", "path": "/3"},
        {"op": "replace", "path": "/5/mes", "value": "Edit of the message that was #6."},
        {"op": "test", "path": "/4/mes", "value": "First edit of #5."},
        {"op": "add", "path": "/0", "value": NEW},
        {"op": "replace", "path": "/10/mes", "value": "Edit of the message that was #10."},
        {"op": "remove", "path": "/99/mes"},
    ]
    before = exported(chat)
    assert _patch(api, chat, ops).status_code == 409  # the last addresses no message: nothing written
    assert exported(chat) == before
    expected = _reference(_messages(chat), ops[:-1])
    assert _patch(api, chat, ops[:-1]).status_code == 200
    assert _messages(chat) == expected


def test_a_block_of_inserts_costs_the_same_few_queries_whatever_its_size(user, django_assert_max_num_queries):
    # Messages put back amid a chat (a front end's hidden messages shown again) come as an add per message: each was
    # an UPDATE of every later row and an INSERT.
    chat = _long_chat(user, 400)
    with django_assert_max_num_queries(8):
        chat_patch(
            chat=chat, operations=[{"op": "add", "path": f"/{100 + n}", "value": _new(n)} for n in range(200)],
            integrity=chat.integrity,
        )  # fmt: skip
    expected = [*(f"Message {n}." for n in range(100)), *(f"Put back {n}." for n in range(200)),
                *(f"Message {n}." for n in range(100, 400))]  # fmt: skip
    assert [line["mes"] for line in _messages(chat)] == expected


def test_a_retried_block_of_inserts_is_skipped_message_by_message(api, user):
    """An `add` of the message already at its place counts as applied, also amid a block being inserted: a retry
    of the whole block adds nothing, and one of its second half after a new first half adds only the first half."""
    chat = _long_chat(user, 20)
    lines = exported(chat)[1:]
    block = [{"op": "add", "path": f"/{5 + n}", "value": _new(n)} for n in range(4)]
    assert _patch(api, chat, block).json()["applied"] == 4
    placed = exported(chat)[1:]
    again = _patch(api, chat, block).json()
    assert (again["applied"], again["skipped"]) == (0, 4)
    assert exported(chat)[1:] == placed
    # Two new messages at 5 and 6, then the block's messages as stored (now at 7 on): only the two are new.
    stored = [{"op": "add", "path": f"/{7 + n}", "value": placed[5 + n]} for n in range(4)]
    new = [{"op": "add", "path": f"/{5 + n}", "value": _new(10 + n)} for n in range(2)]
    answer = _patch(api, chat, [*new, *stored]).json()
    assert (answer["applied"], answer["skipped"]) == (2, 4)
    assert [line["mes"] for line in exported(chat)[1:]] == [
        *(line["mes"] for line in lines[:5]),
        "Put back 10.",
        "Put back 11.",
        *(f"Put back {n}." for n in range(4)),
        *(line["mes"] for line in lines[5:]),
    ]


def test_inserts_then_a_failed_test_insert_nothing(api, user):
    chat = _long_chat(user, 40)
    before = exported(chat)
    ops = [{"op": "add", "path": f"/{10 + n}", "value": _new(n)} for n in range(5)]
    response = _patch(api, chat, [*ops, {"op": "test", "path": "/14/mes", "value": "Not this."}])
    assert response.status_code == 409, response.content
    assert exported(chat) == before
