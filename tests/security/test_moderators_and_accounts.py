"""Moderators get no more than their permissions; sign-in pauses never lock an account for everybody; reset mail
is limited without telling which accounts exist; uploads are refused before they are read; stored API keys survive
a SECRET_KEY rotation."""

import asyncio
import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core import mail
from django.core.cache import cache
from django.core.management import call_command
from django.http.multipartparser import MultiPartParser
from django.test import Client

from apps.chats.models import Chat
from apps.common.secrets import secret_decrypt, secret_encrypt
from apps.common.uploads import LimitedUploadHandler, UploadTooLarge, limit_asgi_body
from apps.llm.models import Connection
from apps.llm.services import connection_create
from apps.memories.models import EmbeddingSettings

pytestmark = pytest.mark.django_db
User = get_user_model()


@pytest.fixture(autouse=True)
def _fresh_counts():
    cache.clear()
    yield
    cache.clear()


def _moderator(*codenames: str) -> User:
    moderator = User.objects.create_user(username="mod", password="moderator pass 1", is_staff=True)
    moderator.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return moderator


def _signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --------------------------------------------------------------------------------------------------- moderators


def test_a_moderator_cannot_redirect_a_users_api_key(user):
    connection = connection_create(
        user=user, name="paid", base_url="https://api.example.com/v1", model="m", api_key="sk-users-own-key-123456"
    )
    client = _signed_in(_moderator("change_connection", "view_connection"))
    page = client.get(f"/admin/llm/connection/{connection.pk}/change/")
    assert page.status_code == 200 and 'name="base_url"' not in page.content.decode()
    client.post(
        f"/admin/llm/connection/{connection.pk}/change/",
        {"name": "paid", "api": "openai", "base_url": "https://attacker.example/v1", "model": "m", "profile": "B"},
    )
    connection.refresh_from_db()
    assert connection.base_url == "https://api.example.com/v1" and connection.user == user
    assert client.get("/admin/llm/connection/add/").status_code == 403


def test_a_moderator_cannot_redirect_a_users_embedding_key(user):
    settings_row = EmbeddingSettings.objects.create(
        user=user, provider="openai", model="m", base_url="https://api.example.com/v1"
    )
    client = _signed_in(_moderator("change_embeddingsettings", "view_embeddingsettings"))
    page = client.get(f"/admin/memories/embeddingsettings/{settings_row.pk}/change/")
    assert page.status_code == 200 and 'name="base_url"' not in page.content.decode()
    client.post(
        f"/admin/memories/embeddingsettings/{settings_row.pk}/change/",
        {"provider": "ollama", "model": "m", "base_url": "https://attacker.example"},
    )
    settings_row.refresh_from_db()
    assert (settings_row.provider, settings_row.base_url) == ("openai", "https://api.example.com/v1")


def _user_form(client, account) -> dict:
    form = client.get(f"/admin/auth/user/{account.pk}/change/").context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and not isinstance(value, list)}
    data.update(date_joined_0="2026-01-01", date_joined_1="00:00:00")
    return data


def test_a_moderator_cannot_make_himself_a_superuser(user):
    moderator = _moderator("change_user", "view_user")
    client = _signed_in(moderator)
    everything = Permission.objects.values_list("pk", flat=True)
    data = _user_form(client, moderator) | {"is_superuser": "on", "is_staff": "on", "user_permissions": everything}
    client.post(f"/admin/auth/user/{moderator.pk}/change/", data)
    moderator.refresh_from_db()
    assert not moderator.is_superuser and moderator.user_permissions.count() == 2
    # Nor grant staff to someone else.
    client.post(f"/admin/auth/user/{user.pk}/change/", _user_form(client, user) | {"is_staff": "on"})
    user.refresh_from_db()
    assert not user.is_staff


def test_a_moderator_cannot_change_a_superuser_or_set_its_password():
    root = User.objects.create_superuser(username="root", password="root pass 12345")
    client = _signed_in(_moderator("change_user", "view_user", "delete_user"))
    assert (
        client.post(
            f"/admin/auth/user/{root.pk}/password/",
            {"password1": "taken over 123", "password2": "taken over 123", "usable_password": "true"},
        ).status_code
        == 403
    )
    root.refresh_from_db()
    assert root.check_password("root pass 12345")
    client.post(f"/admin/auth/user/{root.pk}/change/", {"username": "root2"})
    root.refresh_from_db()
    assert root.username == "root"
    assert client.post(f"/admin/auth/user/{root.pk}/delete/", {"post": "yes"}).status_code == 403
    assert User.objects.filter(pk=root.pk).exists()


def test_a_moderator_cannot_take_over_another_staff_account():
    other = User.objects.create_user(username="other-mod", password="other pass 12345", is_staff=True)
    client = _signed_in(_moderator("change_user", "view_user"))
    response = client.post(
        f"/admin/auth/user/{other.pk}/password/",
        {"password1": "taken over 123", "password2": "taken over 123", "usable_password": "true"},
    )
    assert response.status_code == 403
    other.refresh_from_db()
    assert other.check_password("other pass 12345")


def test_a_moderator_cannot_grant_permissions_through_a_group():
    moderator = _moderator("change_group", "view_group", "add_group")
    group = Group.objects.create(name="mods")
    moderator.groups.add(group)
    client = _signed_in(moderator)
    everything = list(Permission.objects.values_list("pk", flat=True))
    assert client.post(
        f"/admin/auth/group/{group.pk}/change/", {"name": "mods", "permissions": everything}
    ).status_code
    assert group.permissions.count() == 0
    assert client.post("/admin/auth/group/add/", {"name": "x", "permissions": everything}).status_code == 403


def test_a_superuser_still_grants_staff(user):
    client = _signed_in(User.objects.create_superuser(username="root", password="root pass 12345"))
    client.post(f"/admin/auth/user/{user.pk}/change/", _user_form(client, user) | {"is_staff": "on"})
    user.refresh_from_db()
    assert user.is_staff


# --------------------------------------------------------------------------------------------------- sign-in


def _attempt(address: str, username: str, password: str) -> int:
    return Client(REMOTE_ADDR=address).post("/accounts/login/", {"username": username, "password": password})


def test_one_address_cannot_lock_an_account_for_everybody(user, settings):
    settings.LOREKEEPER_LOGIN_ATTEMPTS = 3
    for _ in range(20):  # far past both the account's and the address's limits
        _attempt("203.0.113.9", "alice", "wrong")
    assert _attempt("203.0.113.9", "alice", "correct horse battery").status_code == 429
    assert _attempt("198.51.100.7", "alice", "correct horse battery").status_code == 302


def test_a_paused_address_counts_against_no_account(user, settings):
    settings.LOREKEEPER_LOGIN_ATTEMPTS = 2
    for index in range(10):  # the address's limit: 5 × 2, spent on other names
        _attempt("203.0.113.9", f"someone{index}", "wrong")
    for _ in range(5):  # refused at once, and not counted against alice
        assert _attempt("203.0.113.9", "alice", "wrong").status_code == 429
    for _ in range(2):  # alice's own two attempts from her address are all still there
        assert _attempt("198.51.100.7", "alice", "wrong").status_code == 200
    assert _attempt("198.51.100.7", "alice", "wrong").status_code == 429


# ------------------------------------------------------------------------------------------------ reset mail


def test_reset_mail_is_limited_per_address_of_mail_and_says_the_same_either_way(user, settings):
    settings.LOREKEEPER_PASSWORD_RESET_PER_ACCOUNT = 2
    answers = [
        Client(REMOTE_ADDR=f"203.0.113.{n}").post("/accounts/password_reset/", {"email": "a@x.test"}) for n in range(5)
    ]
    unknown = [
        Client(REMOTE_ADDR=f"198.51.100.{n}").post("/accounts/password_reset/", {"email": "nobody@x.test"})
        for n in range(5)
    ]
    assert len(mail.outbox) == 2
    assert {(a.status_code, a["Location"]) for a in answers + unknown} == {(302, "/accounts/password_reset/done/")}


def test_reset_requests_are_limited_per_client_address(user, settings):
    settings.LOREKEEPER_PASSWORD_RESET_PER_ADDRESS = 3
    client = Client(REMOTE_ADDR="203.0.113.9")
    statuses = [client.post("/accounts/password_reset/", {"email": f"x{n}@x.test"}).status_code for n in range(5)]
    assert statuses == [302, 302, 302, 429, 429]


# --------------------------------------------------------------------------------------------------- uploads


def test_an_upload_over_the_limit_is_refused_by_its_length_before_it_is_read(api, settings):
    settings.LOREKEEPER_MAX_UPLOAD_BYTES = 10_000
    small_body_big_claim = api.post(
        "/api/v1/chats/import",
        {"file": io.BytesIO(b'{"name": "Mira", "mes": "hi"}\n')},
        format="multipart",
        CONTENT_LENGTH="50000000",
    )
    assert small_body_big_claim.status_code == 413
    assert small_body_big_claim.json()["extra"] == {"max_bytes": 10_000}
    assert Chat.objects.count() == 0


def test_an_upload_page_refuses_by_length_too(web, settings):
    settings.LOREKEEPER_MAX_UPLOAD_BYTES = 10_000
    response = web.post("/chats/import/", {"file": io.BytesIO(b"x" * 20_000)})
    assert response.status_code == 413 and "Too large" in response.content.decode()


def test_uploaded_files_stop_being_read_at_the_limit(settings, rf):
    """Without a Content-Length to refuse (a chunked body), the parser stops at the limit, not at the end."""
    settings.LOREKEEPER_MAX_IMPORT_BYTES = 100_000
    boundary = "BoUnDaRy"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="c.jsonl"\r\n\r\n'.encode()
        + b"x" * 5_000_000
        + f"\r\n--{boundary}--\r\n".encode()
    )
    stream = io.BytesIO(body)
    request = rf.post("/")
    meta = {"CONTENT_TYPE": f"multipart/form-data; boundary={boundary}", "CONTENT_LENGTH": str(len(body))}
    handlers = [LimitedUploadHandler(request)] + request.upload_handlers[1:]
    with pytest.raises(UploadTooLarge):
        MultiPartParser(meta, stream, handlers).parse()
    assert stream.tell() < 1_000_000


def test_asgi_bodies_without_length_stop_at_the_limit(settings):
    settings.LOREKEEPER_MAX_UPLOAD_BYTES = 1000
    chunks = [{"type": "http.request", "body": b"x" * 400, "more_body": True} for _ in range(50)]
    consumed, sent = [], []

    async def receive():
        consumed.append(1)
        return chunks[len(consumed) - 1]

    async def send(message):
        sent.append(message)

    async def app(scope, receive, send):  # reads the whole body, as Django's ASGI handler does
        while (await receive())["type"] == "http.request":
            pass

    scope = {"type": "http", "path": "/api/v1/chats/import", "headers": []}
    asyncio.run(limit_asgi_body(app)(scope, receive, send))
    assert len(consumed) == 3 and sent[0]["status"] == 413


# ---------------------------------------------------------------------------------------------- key rotation


def test_stored_api_keys_survive_a_secret_key_rotation(user, settings):
    connection = connection_create(
        user=user, name="m", base_url="https://api.example.com/v1", model="m", api_key="sk-survives-rotation-1"
    )
    old_key = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a brand new secret key " * 3, [old_key]
    stored = Connection.objects.get(pk=connection.pk).api_key_encrypted
    assert secret_decrypt(stored) == "sk-survives-rotation-1"
    call_command("secrets_rotate", stdout=io.StringIO())
    settings.SECRET_KEY_FALLBACKS = []  # the old key retired after the rotation
    assert secret_decrypt(Connection.objects.get(pk=connection.pk).api_key_encrypted) == "sk-survives-rotation-1"


def test_a_secret_no_key_can_read_is_empty(settings):
    token = secret_encrypt("sk-lost")
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "another key entirely " * 3, []
    assert secret_decrypt(token) == ""
