import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken
from apps.accounts.services import api_token_authenticate, api_token_create, api_token_revoke, token_digest

pytestmark = pytest.mark.django_db


def _client(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_token_is_stored_hashed_and_authenticates(user):
    token, raw = api_token_create(user=user, name="laptop")
    assert raw not in (token.digest, token.prefix) and token.digest == token_digest(raw)
    assert not ApiToken.objects.filter(digest=raw).exists()
    assert _client(raw).get("/api/v1/chats/").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_a_token_answers_as_its_own_owner_loaded_whole_and_marks_its_use_once_a_minute(user, other_user):
    from datetime import timedelta

    token, raw = api_token_create(user=other_user, name="phone")
    api_token_create(user=user, name="laptop")
    owner = api_token_authenticate(raw=raw)
    assert owner.pk == other_user.pk and owner.username == other_user.username and owner.email == other_user.email
    assert owner.is_active and not owner._state.adding and owner._state.db == "default"
    owner.first_name = "Ada"
    owner.save(update_fields=["first_name"])  # a model instance like any other: its own row changes
    assert get_user_model().objects.get(pk=other_user.pk).first_name == "Ada"
    assert get_user_model().objects.get(pk=user.pk).first_name != "Ada"

    token.refresh_from_db()
    first = token.last_used_at
    assert first is not None
    api_token_authenticate(raw=raw)
    token.refresh_from_db()
    assert token.last_used_at == first  # within the minute: not written again
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    api_token_authenticate(raw=raw)
    token.refresh_from_db()
    assert token.last_used_at > first


def test_revoked_token_answers_401(user):
    token, raw = api_token_create(user=user, name="laptop")
    api_token_revoke(user=user, token_id=token.pk)
    assert _client(raw).get("/api/v1/chats/").status_code == 401


def test_deactivated_users_token_answers_401(user):
    _, raw = api_token_create(user=user, name="laptop")
    user.is_active = False
    user.save()
    assert _client(raw).get("/api/v1/chats/").status_code == 401


@pytest.mark.parametrize("header", ["Bearer lk_nope", "Bearer", "Bearer a b", "Bearer notours"])
def test_bad_bearer_headers_answer_401(db, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert client.get("/api/v1/chats/").status_code == 401


def test_a_user_cannot_revoke_another_users_token(user, other_user):
    token, _ = api_token_create(user=other_user, name="theirs")
    with pytest.raises(ApiToken.DoesNotExist):
        api_token_revoke(user=user, token_id=token.pk)


def test_create_api_token_command_prints_a_working_token(user, capsys):
    call_command("create_api_token", "alice", "--name", "script")
    raw = capsys.readouterr().out.strip()
    assert ApiToken.objects.get(user=user).name == "script"
    assert _client(raw).get("/api/v1/chats/").status_code == 200


def test_create_api_token_command_rejects_unknown_user(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No user"):
        call_command("create_api_token", "nobody")


def test_ensure_admin_creates_one_admin_once(db, monkeypatch, capsys):
    monkeypatch.delenv("LOREKEEPER_ADMIN_PASSWORD", raising=False)
    call_command("ensure_admin")
    out = capsys.readouterr().out
    assert "password" in out
    call_command("ensure_admin")
    assert capsys.readouterr().out == ""
    assert get_user_model().objects.filter(is_superuser=True).count() == 1


def test_ensure_admin_reads_the_password_from_the_environment(db, monkeypatch, client):
    monkeypatch.setenv("LOREKEEPER_ADMIN_PASSWORD", "a long admin password")
    call_command("ensure_admin", "--username", "root")
    assert client.login(username="root", password="a long admin password")
