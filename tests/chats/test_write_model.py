"""Random sequences of sync operations against the API and an in-memory reference model of a SillyTavern chat:
after every step the exported JSONL equals the model."""

import copy
import json
import math
import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from apps.chats.services.chats import chat_create
from apps.common.jsonpatch import json_equal, merge_patch
from tests.chats.helpers import exported, if_match

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
finite = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != 0 or math.copysign(1, x) > 0)
scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | finite | text
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=8
)
keys = st.sampled_from(["a", "b", "ns", "memory", "k~/x"])
namespaces = st.sampled_from(["ns", "auto_recap_memory", "bme_recall"])


@st.composite
def messages(draw):
    message = {"name": draw(st.sampled_from(["You", "Mira", ""])), "is_user": draw(st.booleans()), "mes": draw(text)}
    if draw(st.booleans()):
        message["extra"] = draw(st.dictionaries(keys, values, max_size=2))
    if draw(st.booleans()):
        swipes = draw(st.lists(text, min_size=1, max_size=3))
        message.update(swipes=swipes, swipe_id=draw(st.integers(0, len(swipes) - 1)), swipe_info=[{} for _ in swipes])
    if draw(st.booleans()):
        message[draw(st.sampled_from(["custom", "gen_started", "title"]))] = draw(values)
    return message


def overlap(stored: list, incoming: list) -> int:
    """Luker's retry rule (docs/GLOSSARY.md): incoming messages equal to the last stored one are dropped while they
    are."""
    skipped = 0
    while stored and skipped < len(incoming) and json_equal(incoming[skipped], stored[-1]):
        skipped += 1
    return skipped


def pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


class ChatMachine(RuleBasedStateMachine):
    api = None
    user = None

    @initialize()
    def start(self):
        self.chat = chat_create(user=self.user, title="model")
        self.header = {
            "user_name": self.user.username,
            "character_name": "",
            "create_date": self.chat.create_date,
            "chat_metadata": {},
        }
        self.messages: list = []
        self.integrity = str(self.chat.integrity)

    def _ok(self, response):
        assert response.status_code == 200, response.content
        self.integrity = response.json()["integrity"]
        return response.json()

    @rule(batch=st.lists(messages(), min_size=1, max_size=3))
    def append(self, batch):
        self._ok(
            self.api.post(
                f"/api/v1/chats/{self.chat.pk}/append", {"messages": batch}, format="json", **if_match(self.integrity)
            )
        )
        self.messages += copy.deepcopy(batch[overlap(self.messages, batch) :])

    @rule(data=st.data())
    def patch_field(self, data):
        if not self.messages:
            return
        i = data.draw(st.integers(0, len(self.messages) - 1))
        key, value = data.draw(keys), data.draw(values)
        ops = [
            {"op": "replace", "path": f"/{i}/mes", "value": data.draw(text)},
            {"op": "add", "path": f"/{i}/{pointer_token(key)}", "value": value},
        ]
        self._ok(
            self.api.post(
                f"/api/v1/chats/{self.chat.pk}/patch", {"operations": ops}, format="json", **if_match(self.integrity)
            )
        )
        self.messages[i]["mes"] = ops[0]["value"]
        self.messages[i][key] = copy.deepcopy(value)

    @rule(data=st.data(), message=messages())
    def patch_structure(self, data, message):
        n = len(self.messages)
        kind = data.draw(st.sampled_from(["insert", "remove", "move"] if n else ["insert"]))
        if kind == "insert":
            i = data.draw(st.integers(0, n))
            op = {"op": "add", "path": f"/{i}", "value": message}
        elif kind == "remove":
            i = data.draw(st.integers(0, n - 1))
            op = {"op": "remove", "path": f"/{i}"}
        else:
            i, j = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
            op = {"op": "move", "from": f"/{i}", "path": f"/{j}"}
        body = self._ok(
            self.api.post(
                f"/api/v1/chats/{self.chat.pk}/patch", {"operations": [op]}, format="json", **if_match(self.integrity)
            )
        )
        if kind == "insert":
            if i < n and json_equal(self.messages[i], message):
                assert body["skipped"] == 1
            else:
                self.messages.insert(i, copy.deepcopy(message))
        elif kind == "remove":
            del self.messages[i]
        else:
            self.messages.insert(j, self.messages.pop(i))

    @rule(patch=st.dictionaries(keys, st.none() | values, max_size=3))
    def metadata(self, patch):
        self._ok(
            self.api.generic(
                "PATCH",
                f"/api/v1/chats/{self.chat.pk}/metadata",
                json.dumps(patch),
                content_type="application/merge-patch+json",
                **if_match(self.integrity),
            )
        )
        self.header["chat_metadata"] = merge_patch(self.header["chat_metadata"], patch)

    @rule(data=st.data(), namespace=namespaces, new=st.dictionaries(keys, values, min_size=1, max_size=2))
    def extension_data(self, data, namespace, new):
        if not self.messages:
            return
        i = data.draw(st.integers(0, len(self.messages) - 1))
        self._ok(
            self.api.patch(
                f"/api/v1/chats/{self.chat.pk}/messages/{i}/data/{namespace}",
                {"values": new},
                format="json",
                **if_match(self.integrity),
            )
        )
        message = self.messages[i]
        extra = message.get("extra") if isinstance(message.get("extra"), dict) else None
        if extra is None:
            # Our columns hold a non-object `extra` verbatim elsewhere; the write starts a fresh object.
            message.pop("extra", None)
            extra = message["extra"] = {}
        current = extra.get(namespace)
        extra[namespace] = {**(current if isinstance(current, dict) else {}), **copy.deepcopy(new)}
        info, swipe_id = message.get("swipe_info"), message.get("swipe_id")
        if (
            isinstance(info, list)
            and isinstance(swipe_id, int)
            and 0 <= swipe_id < len(info)
            and isinstance(info[swipe_id], dict)
        ):
            if not isinstance(info[swipe_id].get("extra"), dict):
                info[swipe_id]["extra"] = {}
            info[swipe_id]["extra"][namespace] = copy.deepcopy(extra[namespace])

    @rule(batch=st.lists(messages(), max_size=4), metadata=st.dictionaries(keys, values, max_size=2))
    def save(self, batch, metadata):
        header = {"user_name": "You", "character_name": "Mira", "chat_metadata": metadata}
        self._ok(
            self.api.post(
                f"/api/v1/chats/{self.chat.pk}/save",
                {"chat": [header, *batch], "integrity": self.integrity},
                format="json",
            )
        )
        self.header, self.messages = copy.deepcopy(header), copy.deepcopy(batch)

    @invariant()
    def export_equals_model(self):
        if hasattr(self, "chat"):
            # JSON value equality: PostgreSQL's jsonb may write 1e16 as 10000000000000000, the same JSON number.
            actual = exported(self.chat)
            assert json_equal(actual, [self.header, *self.messages]), (actual, [self.header, *self.messages])


@pytest.mark.django_db
def test_random_operation_sequences_match_the_reference_model(api, user):
    ChatMachine.api, ChatMachine.user = api, user
    run_state_machine_as_test(
        ChatMachine,
        settings=settings(
            max_examples=int(os.environ.get("LOREKEEPER_HYPOTHESIS_EXAMPLES", "25")),
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )
