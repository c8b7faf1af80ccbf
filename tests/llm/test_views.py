"""The LLM connections pages: list and add, edit, test (htmx row and full page), remove, and the calls page.
The key is never on a page; another user's connection is a 404."""

import pytest

from apps.common.secrets import secret_decrypt
from apps.llm.models import Call, Connection
from apps.llm.services import connection_test
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
KEY = "sk-live-abcdefghijklmnop"
FIXTURE_KEY = "sk-test-1234567890abcd"  # the `llm` fixture's


def _body(response) -> str:
    return response.content.decode()


def _form(**change) -> dict:
    data = {
        "name": "OpenAI",
        "api": "openai",
        "base_url": "https://api.openai.com/v1",
        "model": "gpt-4o-mini",
        "api_key": KEY,
        "profile": "auto",
    } | change
    return {k: v for k, v in data.items() if v is not None}


def _no_key_in(response, key) -> None:
    assert key not in _body(response) and key[:-4] not in _body(response)


# ------------------------------------------------------------------------------------------- list and add


def test_pages_need_sign_in(client, llm):
    for url in ("/llm/", "/llm/calls/", f"/llm/{llm.pk}/"):
        assert client.get(url)["Location"].startswith("/accounts/login/")
    for url in (f"/llm/{llm.pk}/test/", f"/llm/{llm.pk}/delete/"):
        assert client.post(url)["Location"].startswith("/accounts/login/")
    assert Connection.objects.filter(pk=llm.pk, last_tested_at=None).exists()


def test_list_page_shows_connections_and_only_the_key_hint(web, llm, theirs):
    response = web.get("/llm/")
    assert response.status_code == 200
    html = _body(response)
    assert f'<tr id="connection-{llm.pk}">' in html and f'href="/llm/{llm.pk}/"' in html
    assert "scripted" in html and "<code>scripted-model</code>" in html and llm.server.url in html
    assert '<span class="badge">memory work</span>' in html and ">replies</span>" in html
    assert "(detected)" in html and "not tested" in html
    assert "…abcd" in html
    _no_key_in(response, FIXTURE_KEY)
    assert "bob-model" not in html and f"connection-{theirs.pk}" not in html
    assert "No calls yet." in html


def test_list_page_without_connections_explains_what_waits(web):
    assert "No connection yet" in _body(web.get("/llm/"))


def test_posting_the_form_creates_a_connection_and_redirects(web, user):
    response = web.post("/llm/", _form())
    assert response.status_code == 302 and response["Location"] == "/llm/"
    connection = Connection.objects.get(user=user)
    # "Use for background memory work" was left unticked: it is not used for it.
    assert (connection.name, connection.model, connection.is_default) == ("OpenAI", "gpt-4o-mini", False)
    assert secret_decrypt(connection.api_key_encrypted) == KEY
    page = web.get("/llm/")
    assert "Connection “OpenAI” saved." in _body(page) and "…mnop" in _body(page)
    _no_key_in(page, KEY)


def test_an_invalid_form_answers_400_with_the_error_and_without_the_key(web, user):
    response = web.post("/llm/", _form(model=None))
    assert response.status_code == 400
    html = _body(response)
    assert "This field is required." in html and 'class="field invalid"' in html
    _no_key_in(response, KEY)
    assert not Connection.objects.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "SCRIPTED"}, "You already have a connection of that name."),
        ({"base_url": "ftp://files.example.com/v1"}, "The URL must start with http:// or https:// and name a host."),
        ({"model": "   "}, "This field is required."),
        # Past PostgreSQL's integer: a server error before the form had an upper bound.
        ({"context_window": "2147483648"}, "Ensure this value is less than or equal to 10000000."),
    ],
)
def test_a_refused_form_answers_400_with_the_reason_on_its_field(web, llm, change, message):
    response = web.post("/llm/", _form(**change))
    assert response.status_code == 400
    assert f'<span class="field-error" role="alert">{message}</span>' in _body(response)
    _no_key_in(response, KEY)
    assert list(Connection.objects.all()) == [llm]


# ------------------------------------------------------------------------------------------------------ test


def test_the_test_button_answers_the_row_to_htmx(web, llm):
    llm.server.on("Reply with OK", "OK")
    response = web.post(f"/llm/{llm.pk}/test/", **HX)
    assert response.status_code == 200
    html = _body(response)
    assert html.lstrip().startswith(f'<tr id="connection-{llm.pk}">') and "<html" not in html
    assert '<span class="badge status-active">works</span>' in html and "answered in" in html
    _no_key_in(response, FIXTURE_KEY)
    assert Connection.objects.get(pk=llm.pk).last_test_ok is True


def test_a_failing_test_answers_the_row_with_the_reason_to_htmx(web, llm):
    llm.server.on("Reply with OK", Reply(status=401))
    html = _body(web.post(f"/llm/{llm.pk}/test/", **HX))
    assert '<span class="badge status-retired">failed</span>' in html
    assert "the server refused the request (401)" in html


def test_the_test_button_without_htmx_redirects_with_the_outcome(web, llm):
    llm.server.on("Reply with OK", Reply(status=500))
    llm.server.on("Reply with OK", "OK", times=1)

    response = web.post(f"/llm/{llm.pk}/test/")
    assert response.status_code == 302 and response["Location"] == "/llm/"
    assert "“scripted” answered in" in _body(web.get("/llm/"))

    web.post(f"/llm/{llm.pk}/test/")
    assert "“scripted” failed: server error 500 (after 1 attempt)" in _body(web.get("/llm/"))


def test_the_test_button_takes_only_post(web, llm):
    assert web.get(f"/llm/{llm.pk}/test/").status_code == 405
    assert llm.server.requests == []


# ------------------------------------------------------------------------------------------- edit, delete


def test_edit_page_shows_the_connection_and_only_the_key_hint(web, llm):
    response = web.get(f"/llm/{llm.pk}/")
    assert response.status_code == 200
    html = _body(response)
    assert "Edit “scripted”" in html and 'value="scripted-model"' in html
    assert "Detected hardware profile: <strong>A</strong>" in html
    assert "A key is stored (ending …abcd)." in html and "Remove the stored key" in html
    _no_key_in(response, FIXTURE_KEY)


def test_editing_without_a_key_keeps_the_stored_one(web, llm):
    data = _form(name="renamed", base_url=llm.server.url, model="other-model", api_key=None, is_default="on")
    response = web.post(f"/llm/{llm.pk}/", data)
    assert response.status_code == 302 and response["Location"] == "/llm/"
    stored = Connection.objects.get(pk=llm.pk)
    assert (stored.name, stored.model, stored.is_default) == ("renamed", "other-model", True)
    assert secret_decrypt(stored.api_key_encrypted) == FIXTURE_KEY


def test_editing_with_clear_api_key_removes_it(web, llm):
    web.post(f"/llm/{llm.pk}/", _form(base_url=llm.server.url, api_key=None, clear_api_key="on"))
    assert Connection.objects.get(pk=llm.pk).api_key_encrypted == ""
    assert "No key stored." in _body(web.get(f"/llm/{llm.pk}/"))


def test_an_invalid_edit_answers_400_and_changes_nothing(web, llm):
    response = web.post(f"/llm/{llm.pk}/", _form(timeout="0.5"))
    assert response.status_code == 400
    assert 'class="field invalid"' in _body(response)
    assert Connection.objects.get(pk=llm.pk).model == "scripted-model"


def test_delete_removes_the_connection_and_redirects(web, llm):
    response = web.post(f"/llm/{llm.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/llm/"
    assert not Connection.objects.exists()
    assert "Connection “scripted” removed." in _body(web.get("/llm/"))


def test_another_users_connection_is_404_on_every_page(web, theirs, llm_server):
    assert web.get(f"/llm/{theirs.pk}/").status_code == 404
    assert web.post(f"/llm/{theirs.pk}/", _form(name="mine now")).status_code == 404
    assert web.post(f"/llm/{theirs.pk}/test/").status_code == 404
    assert web.post(f"/llm/{theirs.pk}/test/", **HX).status_code == 404
    assert web.post(f"/llm/{theirs.pk}/delete/").status_code == 404
    stored = Connection.objects.get(pk=theirs.pk)
    assert (stored.name, stored.last_tested_at) == ("bob's", None)
    assert llm_server.requests == []


# ----------------------------------------------------------------------------------------------------- calls


def test_calls_page_lists_failed_calls_with_their_error(web, llm):
    llm.server.on("Reply with OK", "<think>trivial</think>OK")
    llm.server.on("Reply with OK", Reply(status=400), times=1)
    connection_test(connection=llm)
    connection_test(connection=llm)

    html = _body(web.get("/llm/calls/"))

    assert html.count("<code>connection_test@v1</code>") == 2
    assert '<tr class="failed">' in html and "the server refused the request (400)" in html
    assert "Thinking (stripped before parsing):" in html and "trivial" in html

    failed = _body(web.get("/llm/calls/", {"status": "error"}))
    assert failed.count("<code>connection_test@v1</code>") == 1 and "the server refused the request (400)" in failed


def test_calls_page_shows_only_the_users_calls(web, theirs):
    connection_test(connection=theirs)
    assert Call.objects.filter(user=theirs.user).exists()
    html = _body(web.get("/llm/calls/"))
    assert "bob-model" not in html and "No calls yet." in html


def test_calls_of_a_removed_connection_stay_listed(web, llm):
    connection_test(connection=llm)
    web.post(f"/llm/{llm.pk}/delete/")
    assert "(removed connection)" in _body(web.get("/llm/calls/"))
