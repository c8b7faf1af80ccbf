"""The Python client's field lists (clients/python/lorekeeper_client/instance.py) are the server's: what an instance
sends back of each object type is what the push's serializers take (apps/sync/records.py), and a change carries the
fields of ChangeSerializer (apps/sync/apis/instances.py). No database: the client talks to a stand-in transport."""

import json
import uuid

import httpx
from lorekeeper_client.http import SyncClient
from lorekeeper_client.instance import WRITABLE

from apps.sync.apis.instances import ChangeSerializer, PushInputSerializer
from apps.sync.models import FeedType
from apps.sync.records import DATA_SERIALIZERS


def test_the_clients_writable_fields_are_the_fields_the_server_takes_for_each_type():
    assert set(WRITABLE) == set(FeedType.values) == set(DATA_SERIALIZERS)
    for kind, serializer in DATA_SERIALIZERS.items():
        assert set(WRITABLE[kind]) == set(serializer().fields), kind


def _pushing_client(pushed: list[dict]) -> SyncClient:
    """A client whose server registers any instance and applies every change, keeping the pushed bodies."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/sync/instances"):
            return httpx.Response(201, json={})
        body = json.loads(request.content)
        pushed.append(body)
        results = [
            {"index": i, "type": c["type"], "uid": c["uid"], "result": "applied", "clock": c["clock"], "item": None}
            for i, c in enumerate(body["changes"])
        ]
        return httpx.Response(200, json={"instance": body["instance"], "results": results, "cursor": 0})

    http = httpx.Client(transport=httpx.MockTransport(answer), base_url="http://lorekeeper.test/api/v1")
    return SyncClient("http://lorekeeper.test", token="lk_test", http=http)


def test_a_pushed_change_carries_the_servers_change_fields_and_nothing_the_server_drops():
    pushed: list[dict] = []
    laptop = _pushing_client(pushed).instance("laptop")
    character = laptop.create("character", {"name": "Mira", "uid": "kept locally", "changed_by": "server"})
    laptop.create("memory", {"kind": "fact", "content": "Mira was born in Hollin.", "character": character, "id": 7})
    laptop.create("settings", {"document": {"lorekeeper": {"enabled": True}}}, uid=str(uuid.uuid4()))
    gone = laptop.create("memory", {"kind": "event", "content": "The bell rang.", "character": character})
    laptop.delete("memory", gone)
    laptop.push()

    (body,) = pushed
    fields = set(ChangeSerializer().fields)
    for change in body["changes"]:
        assert set(change) == (fields - {"data"} if change["op"] == "delete" else fields), change
        if change["op"] != "delete":
            assert set(change["data"]) <= set(WRITABLE[change["type"]])
    assert {change["op"] for change in body["changes"]} == {"create", "delete"}
    serializer = PushInputSerializer(data=body)
    assert serializer.is_valid(), serializer.errors
    for sent, taken in zip(body["changes"], serializer.validated_data["changes"], strict=True):
        assert set(taken["data"]) == set(sent.get("data", {})), sent
