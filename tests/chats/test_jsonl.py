import io

import pytest

from apps.chats.jsonl import HEADER_FIELDS, MESSAGE_FIELDS, ImportLineError, iter_objects, join_fields, split_fields

ODD_MESSAGES = [
    {},
    {"mes": "only text"},
    {"name": 5, "is_user": "yes", "mes": None, "extra": [], "swipes": "not a list", "swipe_id": -1, "swipe_info": {}},
    {"name": "A", "is_user": True, "swipe_id": True, "unknown": {"deep": [None]}},
    {"swipe_id": 2**40, "send_date": None, "extra": {"a": 1}},
]


@pytest.mark.parametrize("obj", ODD_MESSAGES)
def test_split_then_join_gives_back_the_same_message(obj):
    columns, other, absent = split_fields(obj, MESSAGE_FIELDS)
    assert join_fields(columns, other, absent, MESSAGE_FIELDS) == obj


def test_split_keeps_mistyped_known_keys_verbatim_in_other_fields():
    columns, other, absent = split_fields({"is_user": "yes", "mes": "x"}, MESSAGE_FIELDS)
    assert other == {"is_user": "yes"}
    assert columns["is_user"] is False and columns["mes"] == "x"
    assert "name" in absent and "is_user" not in absent


def test_header_split_round_trips_the_oldest_style():
    header = {"user_name": "You", "character_name": "Aqua", "create_date": 1674559896839}
    columns, other, absent = split_fields(header, HEADER_FIELDS)
    assert absent == ["chat_metadata"]
    assert join_fields(columns, other, absent, HEADER_FIELDS) == header


def _objects(data: bytes):
    return list(iter_objects(io.BytesIO(data)))


def test_lines_are_numbered_from_one_and_blank_lines_skipped():
    assert [n for n, _ in _objects(b'{"a":1}\n\n{"b":2}\r\n{"c":3}')] == [1, 3, 4]


def test_a_byte_order_mark_is_ignored():
    assert _objects(b'\xef\xbb\xbf{"a":1}') == [(1, {"a": 1})]


def test_a_line_longer_than_the_read_chunk_is_read_whole():
    long_text = "x" * (600 * 1024)
    [(_, obj)] = _objects(('{"mes":"' + long_text + '"}').encode())
    assert obj["mes"] == long_text


@pytest.mark.parametrize(
    ("data", "line", "problem"),
    [
        (b'{"a":1}\n{"a":\n', 2, "not valid JSON"),
        (b'{"a":1}\n[1,2]', 2, "expected a JSON object"),
        (b'{"a":NaN}', 1, "not valid JSON"),
        (b'{"a":1}\n{"a":1}\n{"a":"\\u0000"}', 3, "NUL"),
        (b'{"a":"\\ud800"}', 1, "surrogate"),
        (b'{"a":1}\n{"a":"\xff"}', 2, "UTF-8"),
    ],
)
def test_a_bad_line_is_named_with_its_number(data, line, problem):
    with pytest.raises(ImportLineError) as caught:
        _objects(data)
    assert caught.value.extra["line"] == line
    assert problem in caught.value.message
    assert caught.value.message.startswith(f"Line {line}:")
