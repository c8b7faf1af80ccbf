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


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


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
    _, raw = api_token_create(user=user, name="t")
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    # Another session ends ours, as a restarting server would.
    other = connection.copy()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        mine = cursor.fetchone()[0]
    with other.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [mine])
    other.close()
    response = client.post("/api/v1/chats/", {"title": "During the outage"}, format="json")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert "nothing was saved" in response.json()["message"]
    # Logged as one line naming the cause; no traceback per request of an outage.
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage().startswith("Service Unavailable: /api/v1/chats/ (database unavailable: ")
    assert record.exc_info is None and "Traceback" not in caplog.text
    connection.close()
    assert not Chat.objects.filter(title="During the outage").exists()
    assert client.get("/api/v1/chats/").status_code == 200  # back by itself (a new connection)


@pytest.mark.django_db(transaction=True)
def test_the_web_pages_answer_503_too(user):
    web = Client(raise_request_exception=False)
    web.force_login(user)
    other = connection.copy()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        mine = cursor.fetchone()[0]
    with other.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [mine])
    other.close()
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
