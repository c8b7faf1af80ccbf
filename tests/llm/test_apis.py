"""The LLM connections API under /api/v1/llm/: wiring, status codes, response shapes, tenancy, and the key that
never comes back."""

import pytest
from rest_framework.test import APIClient

from apps.common.secrets import secret_decrypt
from apps.llm.models import Call, Connection
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

CONNECTIONS = "/api/v1/llm/connections/"
CALLS = "/api/v1/llm/calls/"
KEY = "sk-live-abcdefghijklmnop"
FIXTURE_KEY = "sk-test-1234567890abcd"  # the `llm` fixture's


def _detail(connection) -> str:
    return f"{CONNECTIONS}{connection.pk}/"


def _test(connection) -> str:
    return f"{CONNECTIONS}{connection.pk}/test"


def _error_field(response) -> str:
    """The field a 400 names: DRF's `{field: [...]}` or ApplicationError's `{"extra": {"field": ...}}`."""
    body = response.json()
    if "extra" in body:
        return body["extra"]["field"]
    [field] = body
    return field


def _no_key_in(response, key=KEY) -> None:
    assert key.encode() not in response.content
    assert key[:-4].encode() not in response.content


# ---------------------------------------------------------------------------------------------- list, create


def test_list_answers_the_users_connections_without_keys(api, llm, theirs):
    response = api.get(CONNECTIONS)
    assert response.status_code == 200
    [body] = response.json()["results"]
    assert body["id"] == llm.pk and body["name"] == "scripted" and body["model"] == "scripted-model"
    assert (body["api"], body["base_url"], body["is_default"]) == ("openai", llm.server.url, True)
    assert (body["has_api_key"], body["api_key_hint"]) == (True, "abcd")
    assert (body["profile"], body["effective_profile"]) == ("auto", "A")
    assert (body["last_tested_at"], body["last_test_ok"], body["last_test_message"]) == (None, None, "")
    assert "api_key" not in body and "api_key_encrypted" not in body
    _no_key_in(response, FIXTURE_KEY)


def test_list_of_a_user_without_connections_is_empty(api):
    assert api.get(CONNECTIONS).json() == {"results": []}


def test_create_stores_the_key_encrypted_and_never_answers_it(api, user):
    response = api.post(
        CONNECTIONS,
        {"name": "OpenAI", "base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini", "api_key": KEY},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["api"], body["profile"], body["effective_profile"]) == ("OpenAI", "openai", "auto", "B")
    assert (body["has_api_key"], body["api_key_hint"], body["is_default"]) == (True, "mnop", False)  # not ticked
    assert (body["context_window"], body["timeout"]) == (None, None)
    _no_key_in(response)
    connection = Connection.objects.get(pk=body["id"], user=user)
    assert secret_decrypt(connection.api_key_encrypted) == KEY


def test_create_takes_every_field(api, llm_server):
    response = api.post(
        CONNECTIONS,
        {
            "name": "home ollama",
            "api": "ollama",
            "base_url": llm_server.ollama_url,
            "model": "qwen3:8b",
            "profile": "B",
            "context_window": 32768,
            "timeout": 30,
            "is_default": True,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["api"], body["profile"], body["effective_profile"]) == ("ollama", "B", "B")
    assert (body["context_window"], body["timeout"], body["is_default"]) == (32768, 30.0, True)
    assert (body["has_api_key"], body["api_key_hint"]) == (False, "")


def test_create_with_an_idempotency_key_applies_once(api):
    data = {"name": "OpenAI", "base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini", "api_key": KEY}
    first = api.post(CONNECTIONS, data, format="json", HTTP_IDEMPOTENCY_KEY="create-1")
    again = api.post(CONNECTIONS, data, format="json", HTTP_IDEMPOTENCY_KEY="create-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again["Idempotent-Replayed"] == "true" and again.json() == first.json()
    assert Connection.objects.count() == 1
    _no_key_in(again)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model": None}, "model"),
        ({"model": ""}, "model"),
        ({"name": None}, "name"),
        ({"base_url": "not a url"}, "base_url"),
        ({"base_url": "ftp://files.example.com/v1"}, "base_url"),
        ({"api": "grpc"}, "api"),
        ({"profile": "C"}, "profile"),
        ({"timeout": 0}, "timeout"),
        ({"context_window": 100}, "context_window"),
        ({"context_window": 10_000_001}, "context_window"),
        ({"name": "nul\x00name"}, "name"),
        ({"name": "SCRIPTED"}, "name"),
    ],
)
def test_create_with_bad_input_answers_400_naming_the_field_and_stores_nothing(api, llm, change, field):
    data = {"name": "new", "base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini", "api_key": KEY} | change
    response = api.post(CONNECTIONS, {k: v for k, v in data.items() if v is not None}, format="json")
    assert response.status_code == 400, response.content
    assert _error_field(response) == field
    _no_key_in(response)
    assert list(Connection.objects.all()) == [llm]


def test_create_of_a_private_host_on_a_public_deployment_is_400(api, settings):
    settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS = False
    response = api.post(CONNECTIONS, {"name": "x", "base_url": "http://10.0.0.5/v1", "model": "m"}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "message": "This deployment does not call private or local network addresses.",
        "extra": {"field": "base_url"},
    }
    assert not Connection.objects.exists()


def test_create_with_an_impossible_port_answers_400(api):
    response = api.post(
        CONNECTIONS, {"name": "x", "base_url": "http://api.example.com:99999/v1", "model": "m"}, format="json"
    )
    assert response.status_code == 400 and _error_field(response) == "base_url"


# ------------------------------------------------------------------------------------ retrieve, patch, delete


def test_retrieve_answers_one_connection(api, llm):
    response = api.get(_detail(llm))
    assert response.status_code == 200
    assert response.json()["id"] == llm.pk
    _no_key_in(response, FIXTURE_KEY)


def test_patch_changes_only_the_given_fields_and_keeps_the_key(api, user, llm_server):
    created = api.post(
        CONNECTIONS,
        {"name": "ollama", "api": "ollama", "base_url": llm_server.ollama_url, "model": "a", "profile": "B"},
        format="json",
    ).json()
    url = f"{CONNECTIONS}{created['id']}/"
    api.patch(url, {"api_key": KEY}, format="json")

    response = api.patch(url, {"model": "b"}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    # Defaults of the input serializer do not apply to a partial update.
    assert (body["model"], body["api"], body["profile"], body["name"]) == ("b", "ollama", "B", "ollama")
    assert (body["has_api_key"], body["api_key_hint"]) == (True, "mnop")
    _no_key_in(response)
    assert secret_decrypt(Connection.objects.get(pk=created["id"]).api_key_encrypted) == KEY


def test_patch_with_an_empty_key_clears_it(api, llm):
    response = api.patch(_detail(llm), {"api_key": ""}, format="json")
    assert response.status_code == 200
    assert (response.json()["has_api_key"], response.json()["api_key_hint"]) == (False, "")
    assert Connection.objects.get(pk=llm.pk).api_key_encrypted == ""


def test_patch_with_bad_input_answers_400_and_changes_nothing(api, llm):
    for data, field in (({"model": ""}, "model"), ({"base_url": "ftp://x.example/v1"}, "base_url")):
        response = api.patch(_detail(llm), data, format="json")
        assert response.status_code == 400 and _error_field(response) == field
    stored = Connection.objects.get(pk=llm.pk)
    assert (stored.model, stored.base_url) == ("scripted-model", llm.server.url)


def test_patch_making_another_connection_default_moves_the_default(api, llm):
    other = api.post(CONNECTIONS, {"name": "other", "base_url": llm.server.url, "model": "m"}, format="json").json()
    assert other["is_default"] is False
    response = api.patch(f"{CONNECTIONS}{other['id']}/", {"is_default": True}, format="json")
    assert response.json()["is_default"] is True
    assert api.get(_detail(llm)).json()["is_default"] is False


def test_delete_removes_the_connection_and_promotes_no_other(api, llm):
    other = api.post(CONNECTIONS, {"name": "other", "base_url": llm.server.url, "model": "m"}, format="json").json()
    response = api.delete(_detail(llm))
    assert response.status_code == 204
    assert not Connection.objects.filter(pk=llm.pk).exists()
    assert api.get(f"{CONNECTIONS}{other['id']}/").json()["is_default"] is False
    assert api.get(_detail(llm)).status_code == 404


# ----------------------------------------------------------------------------------------------------- test


def test_test_answers_the_connection_with_its_outcome(api, llm):
    llm.server.on("Reply with OK", "OK")
    response = api.post(_test(llm))
    assert response.status_code == 200
    body = response.json()
    assert body["last_test_ok"] is True and body["last_tested_at"]
    assert body["last_test_message"].endswith(": 'OK'")
    _no_key_in(response, FIXTURE_KEY)


def test_a_failed_test_is_still_200_with_the_reason(api, llm):
    llm.server.on("Reply with OK", Reply(status=404))
    response = api.post(_test(llm))
    assert response.status_code == 200
    body = response.json()
    assert body["last_test_ok"] is False
    assert body["last_test_message"].startswith("the server refused the request (404)")
    _no_key_in(response, FIXTURE_KEY)


# ----------------------------------------------------------------------------------------------------- calls


def test_calls_lists_the_users_calls_newest_first(api, other_api, llm):
    llm.server.on("Reply with OK", Reply(status=400), times=1)
    api.post(_test(llm))
    api.post(_test(llm))

    response = api.get(CALLS)

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"next", "previous", "results"}
    newest, oldest = body["results"]
    assert (newest["status"], oldest["status"]) == ("ok", "error")
    assert (newest["connection"], newest["purpose"], newest["template"]) == (
        llm.pk,
        "connection_test",
        "connection_test@v1",
    )
    assert (newest["response"], newest["attempts"], newest["model"]) == ("NONE", 1, "scripted-model")
    assert oldest["error"].startswith("the server refused the request (400)")
    _no_key_in(response, FIXTURE_KEY)
    assert other_api.get(CALLS).json()["results"] == []


def test_calls_filter_by_status(api, llm):
    llm.server.on("Reply with OK", Reply(status=400), times=1)
    api.post(_test(llm))
    api.post(_test(llm))
    assert [c["status"] for c in api.get(CALLS, {"status": "error"}).json()["results"]] == ["error"]
    assert [c["status"] for c in api.get(CALLS, {"status": "ok"}).json()["results"]] == ["ok"]
    assert len(api.get(CALLS, {"status": ""}).json()["results"]) == 2


def test_calls_with_an_unknown_status_is_400(api):
    response = api.get(CALLS, {"status": "pending"})
    assert response.status_code == 400
    allowed = ["ok", "error", "stopped"]
    assert response.json() == {"message": "Unknown status.", "extra": {"field": "status", "allowed": allowed}}


def test_calls_are_paged_by_cursor(api, llm):
    for _ in range(3):
        api.post(_test(llm))
    first = api.get(CALLS, {"limit": 2}).json()
    assert len(first["results"]) == 2 and first["next"]
    second = api.get(first["next"]).json()
    assert len(second["results"]) == 1 and second["next"] is None
    ids = [c["id"] for c in first["results"] + second["results"]]
    assert ids == sorted(Call.objects.values_list("id", flat=True), reverse=True)


# --------------------------------------------------------------------------------------------------- tenancy


def test_another_users_connection_is_404_on_every_verb(api, theirs, llm_server):
    for response in (
        api.get(_detail(theirs)),
        api.patch(_detail(theirs), {"model": "mine now", "api_key": ""}, format="json"),
        api.post(_test(theirs)),
        api.delete(_detail(theirs)),
    ):
        assert response.status_code == 404, response.content
    stored = Connection.objects.get(pk=theirs.pk)
    assert (stored.model, stored.last_tested_at, stored.api_key_hint) == ("bob-model", None, "zzzz")
    assert api.get(CONNECTIONS).json() == {"results": []}
    assert not Call.objects.exists() and llm_server.requests == []


def test_unauthenticated_requests_answer_401(llm):
    client = APIClient()
    for response in (
        client.get(CONNECTIONS),
        client.post(CONNECTIONS, {"name": "x", "base_url": "https://a.example/v1", "model": "m"}, format="json"),
        client.get(_detail(llm)),
        client.patch(_detail(llm), {"model": "x"}, format="json"),
        client.delete(_detail(llm)),
        client.post(_test(llm)),
        client.get(CALLS),
    ):
        assert response.status_code == 401
    assert list(Connection.objects.all()) == [llm]
