"""json_bytes (apps/common/jsonsafe.py), the encoding of the bodies sent to a person's model: the same JSON as the
standard library's, and the standard library's own where orjson refuses a value."""

import json

from apps.common.jsonsafe import json_bytes


def test_a_history_encodes_to_the_json_the_standard_library_reads_back():
    body = {
        "model": "story",
        "messages": [{"role": "user", "content": f'Ça va, Rowan? 港 🌊 \\ " \n {n}'} for n in range(50)],
        "temperature": 0.7,
        "stream": True,
        "stop": None,
    }
    assert json.loads(json_bytes(body)) == body


def test_what_orjson_refuses_is_encoded_by_the_standard_library():
    body = {"seed": 2**70, "messages": [{"role": "user", "content": "half a pair: \ud83c"}]}
    encoded = json_bytes(body)
    assert json.loads(encoded) == body
    assert b"\\ud83c" in encoded
