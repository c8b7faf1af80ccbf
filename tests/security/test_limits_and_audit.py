"""Rate limits (the API per token, sign-in per account and address), the audit log staff can read, secrets kept out
of the logs, and the answer when the database is unreachable: 503 with Retry-After, nothing half-written."""

import logging
import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken, AuditEvent
from apps.accounts.services import api_token_create
from apps.chats.models import Chat

pytestmark = pytest.mark.django_db


@pytest.fixture
def limited(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api": "3/min"}}
    from django.core.cache import cache

    cache.clear()
    yield
    try:
        cache.clear()
    except Exception:  # noqa: BLE001, S110 — a test pointed the cache at nothing
        pass


def bearer(raw: str, **options) -> APIClient:
    client = APIClient(**options)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def end_this_session() -> None:
    """Another session ends this process's database session, as a server going down would."""
    other = connection.copy()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        mine = cursor.fetchone()[0]
    with other.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [mine])
    other.close()


def test_the_api_is_limited_per_token(user, limited):
    _, first = api_token_create(user=user, name="one")
    _, second = api_token_create(user=user, name="two")
    one = bearer(first)
    assert [one.get("/api/v1/chats/").status_code for _ in range(3)] == [200, 200, 200]
    refused = one.get("/api/v1/chats/")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert bearer(second).get("/api/v1/chats/").status_code == 200  # another token has its own budget


def test_a_cache_that_is_down_does_not_take_the_api_down(user, limited, settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/1",
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    _, raw = api_token_create(user=user, name="one")
    client = bearer(raw)
    assert [client.get("/api/v1/chats/").status_code for _ in range(5)] == [200] * 5


def test_sign_in_pauses_after_repeated_failures(user, settings, client):
    settings.LOREKEEPER_LOGIN_ATTEMPTS = 3
    from django.core.cache import cache

    cache.clear()
    for _ in range(3):
        assert client.post("/accounts/login/", {"username": "alice", "password": "wrong"}).status_code == 200
    paused = client.post("/accounts/login/", {"username": "alice", "password": "correct horse battery"})
    assert paused.status_code == 429 and "Too many failed sign-ins" in paused.content.decode()
    assert int(paused["Retry-After"]) == settings.LOREKEEPER_LOGIN_WINDOW_SECONDS
    (event,) = AuditEvent.objects.filter(action="login.locked")
    assert event.target == "alice" and event.ip == "127.0.0.1"
    cache.clear()
    assert (
        client.post("/accounts/login/", {"username": "alice", "password": "correct horse battery"}).status_code == 302
    )


def test_token_creation_and_revocation_are_audited_without_the_secret(web, user):
    page = web.post("/accounts/tokens/", {"name": "laptop"}).content.decode()
    token = ApiToken.objects.get(user=user)
    web.post(f"/accounts/tokens/{token.pk}/revoke/")
    events = list(AuditEvent.objects.filter(user=user).order_by("id").values_list("action", "target"))
    assert events == [("token.created", f"laptop ({token.prefix}…)"), ("token.revoked", f"laptop ({token.prefix}…)")]
    raw = re.search(r"lk_[A-Za-z0-9_-]{30,}", page).group()
    assert not AuditEvent.objects.filter(target__contains=raw[10:]).exists()


def test_staff_read_the_audit_and_moderation_logs(client, user):
    admin = get_user_model().objects.create_superuser(username="mod", password="moderator pass 1")
    client.force_login(admin)
    client.post(
        "/admin/auth/user/", {"action": "deactivate_users", "_selected_action": [user.pk]}
    )  # a moderation action
    audit = client.get("/admin/accounts/auditevent/").content.decode()
    assert "user.deactivated" in audit and "alice" in audit
    moderation = client.get("/admin/admin/logentry/").content.decode()
    assert "Deactivated through the admin action." in moderation
    assert client.get("/admin/admin/logentry/add/").status_code == 403  # read-only


def test_people_who_are_not_staff_cannot_read_the_logs(web):
    assert web.get("/admin/accounts/auditevent/").status_code == 302


def test_tokens_and_model_keys_never_reach_the_logs(user, llm_server, caplog):
    from apps.llm.client import LlmError, complete
    from apps.llm.services import connection_create
    from tests.llm_server import Reply

    caplog.set_level(logging.DEBUG)
    _, raw = api_token_create(user=user, name="logged?")
    client = bearer(raw)
    client.get("/api/v1/chats/")
    bearer(raw + "x").get("/api/v1/chats/")  # a failed authentication
    key = "sk-secret-model-key-0123456789"
    connection = connection_create(user=user, name="m", base_url=llm_server.url, model="m", api_key=key)
    llm_server.on(lambda prompt: True, Reply("", status=500))
    with pytest.raises(LlmError):
        complete(connection, [{"role": "user", "content": "hello"}], purpose="test", retries=0)
    logged = caplog.text
    assert raw not in logged and raw[10:] not in logged
    assert key not in logged


@pytest.mark.django_db(transaction=True)
def test_a_database_that_drops_the_connection_answers_503_with_retry_after(user, caplog):
    client = bearer(api_token_create(user=user, name="t")[1], raise_request_exception=False)
    end_this_session()  # as a restarting server would
    response = client.post("/api/v1/chats/", {"title": "During the outage"}, format="json")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert "Try again shortly" in response.json()["message"]
    # Logged as one line naming the cause; no traceback per request of an outage.
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage().startswith("Service Unavailable: /api/v1/chats/ (database unavailable: ")
    assert record.exc_info is None and "Traceback" not in caplog.text
    connection.close()
    assert not Chat.objects.filter(title="During the outage").exists()
    assert client.get("/api/v1/chats/").status_code == 200  # back by itself (a new connection)


@pytest.fixture
def chat_insert_trigger():
    """Run a PL/pgSQL statement inside the write, when a chat titled "Doomed" is inserted."""
    made = []

    def make(body: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE FUNCTION lk_test_fault() RETURNS trigger AS $$ BEGIN {body}; RETURN NEW; END $$ "
                "LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER lk_test_fault AFTER INSERT ON chats_chat FOR EACH ROW "
                "WHEN (NEW.title = 'Doomed') EXECUTE FUNCTION lk_test_fault()"
            )
        made.append(True)

    yield make
    if made:
        connection.close()
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER lk_test_fault ON chats_chat")
            cursor.execute("DROP FUNCTION lk_test_fault()")


@pytest.mark.django_db(transaction=True)
def test_a_session_ended_in_the_middle_of_a_write_answers_503_and_keeps_nothing_of_it(user, chat_insert_trigger):
    # The server ends the session after the chat row is inserted and before the request's transaction commits.
    chat_insert_trigger("PERFORM pg_terminate_backend(pg_backend_pid())")
    client = bearer(api_token_create(user=user, name="t")[1], raise_request_exception=False)
    connection.close()  # the request opens its own session
    response = client.post("/api/v1/chats/", {"title": "Doomed", "user_name": "Rowan"}, format="json")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    connection.close()
    assert not Chat.objects.filter(title="Doomed").exists()
    assert client.post("/api/v1/chats/", {"title": "Spared"}, format="json").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_a_deadlock_is_a_server_error_not_an_outage(user, chat_insert_trigger, caplog):
    # The database is there and refused the statement: a 500 with its traceback in the log, not "try again".
    chat_insert_trigger("RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'")
    client = bearer(api_token_create(user=user, name="t")[1], raise_request_exception=False)
    response = client.post("/api/v1/chats/", {"title": "Doomed"}, format="json")
    assert response.status_code == 500 and "Retry-After" not in response
    assert "Traceback" in caplog.text or any(r.exc_info for r in caplog.records if r.name == "django.request")
    assert not Chat.objects.filter(title="Doomed").exists()


@pytest.mark.django_db(transaction=True)
def test_the_web_pages_answer_503_too(user):
    web = Client(raise_request_exception=False)
    web.force_login(user)
    end_this_session()
    response = web.get("/chats/")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert "Back in a moment" in response.content.decode()
    connection.close()


def test_error_reports_hide_the_authorization_header_and_secret_settings(user, rf, settings):
    from django.views.debug import ExceptionReporter

    settings.LOREKEEPER_EMBEDDINGS_API_KEY = "sk-embedding-key-in-settings"
    _, raw = api_token_create(user=user, name="reported?")
    request = rf.get("/api/v1/chats/", HTTP_AUTHORIZATION=f"Bearer {raw}")
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        report = ExceptionReporter(request, type(exc), exc, exc.__traceback__).get_traceback_text()
    assert "HTTP_AUTHORIZATION" in report  # the header is named, its value is not
    assert raw not in report and "sk-embedding-key-in-settings" not in report


@pytest.mark.parametrize(
    ("broker", "cache"),
    [
        ("redis://redis:6379/0", "redis://redis:6379/1"),
        ("redis://redis:6379", "redis://redis:6379/1"),
        (
            "rediss://:secret@cache.example:6380/3?ssl_cert_reqs=none",
            "rediss://:secret@cache.example:6380/1?ssl_cert_reqs=none",
        ),
        ("amqp://guest@rabbit//", ""),
    ],
)
def test_the_shared_cache_is_database_1_of_a_redis_broker(broker, cache):
    from apps.common.embedded import cache_url_from_broker

    assert cache_url_from_broker(broker) == cache


def test_look_alike_names_count_against_the_same_account(user, settings, client):
    settings.LOREKEEPER_LOGIN_ATTEMPTS = 3
    from django.core.cache import cache

    cache.clear()
    for name in ("alice", "ａｌｉｃｅ", "ALICE"):  # the form signs in with the NFKC form: all of them are alice
        assert client.post("/accounts/login/", {"username": name, "password": "wrong"}).status_code == 200
    paused = client.post("/accounts/login/", {"username": "ａlice", "password": "correct horse battery"})
    assert paused.status_code == 429
    (event,) = AuditEvent.objects.filter(action="login.locked")
    assert event.user == user  # the account, where it exists
    cache.clear()


def test_a_right_password_starts_the_count_again(user, settings, client):
    settings.LOREKEEPER_LOGIN_ATTEMPTS = 3
    from django.core.cache import cache

    cache.clear()
    for _ in range(2):
        client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert (
        client.post("/accounts/login/", {"username": "alice", "password": "correct horse battery"}).status_code == 302
    )
    client.logout()
    for _ in range(3):  # three more failures are allowed again
        assert client.post("/accounts/login/", {"username": "alice", "password": "wrong"}).status_code == 200
    assert client.post("/accounts/login/", {"username": "alice", "password": "wrong"}).status_code == 429
    cache.clear()


def test_the_admin_sign_in_pauses_too(settings, client):
    settings.LOREKEEPER_LOGIN_ATTEMPTS = 2
    from django.core.cache import cache

    cache.clear()
    get_user_model().objects.create_superuser(username="root", password="correct horse battery")
    for _ in range(2):
        assert client.post("/admin/login/", {"username": "root", "password": "wrong"}).status_code == 200
    paused = client.post("/admin/login/", {"username": "root", "password": "correct horse battery"})
    assert paused.status_code == 429 and "Sign-in paused" in paused.content.decode()
    assert "_auth_user_id" not in client.session
    cache.clear()
    assert client.post("/admin/login/", {"username": "root", "password": "correct horse battery"}).status_code == 302


def test_unticking_active_in_the_admin_is_audited(user, client):
    admin_user = get_user_model().objects.create_superuser(username="root", password="x")
    client.force_login(admin_user)
    page = client.get(f"/admin/auth/user/{user.pk}/change/")
    form = page.context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and not isinstance(value, list)}
    data.update(
        username=user.username, is_active="", date_joined_0="2026-01-01", date_joined_1="00:00:00", email=user.email
    )
    data.pop("password", None)
    data.pop("last_login", None)
    response = client.post(f"/admin/auth/user/{user.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    user.refresh_from_db()
    assert not user.is_active
    (event,) = AuditEvent.objects.filter(action="user.deactivated")
    assert event.user == user and event.actor == admin_user


@pytest.mark.parametrize(
    ("hops", "forwarded", "expected"),
    [
        (0, "203.0.113.9", "10.0.0.2"),  # no proxy configured: the header is the client's own words
        (1, "203.0.113.9", "203.0.113.9"),  # what the proxy saw
        (1, "198.51.100.1, 203.0.113.9", "203.0.113.9"),  # a client's forged entry comes first: ignored
        (2, "198.51.100.1, 203.0.113.9, 10.0.0.7", "203.0.113.9"),
        (1, "not-an-address", "10.0.0.2"),
        (2, "203.0.113.9", "10.0.0.2"),  # shorter than the proxies configured
    ],
)
def test_the_client_address_behind_proxies(rf, settings, hops, forwarded, expected):
    from apps.accounts.audit import client_ip

    settings.LOREKEEPER_PROXY_HOPS = hops
    request = rf.get("/", HTTP_X_FORWARDED_FOR=forwarded, REMOTE_ADDR="10.0.0.2")
    assert client_ip(request) == expected


def test_someone_signed_in_cannot_reset_another_accounts_count(user, other_user, settings, client):
    settings.LOREKEEPER_LOGIN_ATTEMPTS = 2
    from django.core.cache import cache

    cache.clear()
    client.force_login(other_user)  # bob, signed in, guessing alice's password through the form
    for _ in range(2):
        assert client.post("/accounts/login/", {"username": "alice", "password": "wrong"}).status_code == 200
    assert client.post("/accounts/login/", {"username": "alice", "password": "guess"}).status_code == 429
    cache.clear()
