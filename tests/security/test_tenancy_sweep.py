"""A sweep over every URL pattern of the site (API and pages, the admin aside): with the objects of one user in the
addresses, another user gets a 404 (or 405 where a method does not exist) for every method, learns nothing, and
changes nothing; a visitor who is not signed in gets 401 from the API and the sign-in page from the site.

New routes are covered by themselves: a route with a parameter this sweep cannot fill fails the sweep."""

import io
import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken
from apps.accounts.services import api_token_create
from apps.archives.models import Backup
from apps.chats.models import Character, Chat, ChatRevision, Message, Persona
from apps.chats.services.chats import chat_import
from apps.extraction.models import ModelTest, PipelineJob, Recap, Scene
from apps.llm.services import connection_create, sampler_preset_save
from apps.lorebooks.models import Lorebook, LorebookEntry
from apps.lorebooks.services.books import lorebook_import
from apps.memories.models import Entity, LifecycleJob, Memory
from apps.memories.services.memories import memory_create
from apps.sync.models import Instance
from apps.sync.services.instances import instance_register
from tests.chats.helpers import fixture_bytes

pytestmark = pytest.mark.django_db

# Addresses that authenticate by API token only: the REST API, and the OpenAI-compatible gateway (no session there).
API = ("api/", "v1/")
SKIP = re.compile(r"^(admin/|api/v1/schema/|api/v1/docs/|accounts/(login|logout|password|reset|signup)|static/)")
METHODS = ("get", "post", "put", "patch", "delete")


def routes() -> list[str]:
    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern)

    return sorted({route for route in walk(get_resolver().url_patterns) if not SKIP.match(route)})


@pytest.fixture
def owned(user, scripted):
    """One of everything, owned by `user`: the parameters of every address."""
    chat = chat_import(user=user, stream=io.BytesIO(fixture_bytes("current_swipes.jsonl")), title="Private")
    character = chat.characters.first()
    memory = memory_create(
        user=user, kind="fact", content="Private fact.", character=character, entities=[{"name": "Secret"}]
    )
    connection = connection_create(
        user=user, name="mine", base_url="http://127.0.0.1:9/v1", model="m", api_key="sk-private"
    )
    instance, _ = instance_register(user=user, key="laptop")
    token, _ = api_token_create(user=user, name="mine")
    backup = Backup.objects.create(user=user, kind="backup", trigger="manual", state="done")
    lorebook = lorebook_import(
        user=user, name="Secret", data={"entries": {"7": {"uid": 7, "key": ["vault"], "content": "Private lore."}}}
    )
    values = {
        "chat_id": chat.pk,
        "character_id": character.pk,
        "memory_id": memory.pk,
        "entity_id": Entity.objects.get(user=user, name="Secret").pk,
        "index": 1,
        "namespace": "st_bme",
        "revision_id": ChatRevision.objects.create(
            chat=chat, reason="test", integrity=chat.integrity, message_count=1, jsonl_gzip=b""
        ).pk,
        "key": instance.key,
        "backup_id": backup.pk,
        "connection_id": connection.pk,
        "model": connection.name,  # /v1/models/<model>: a connection of the owner's, by name
        "scene_id": Scene.objects.create(user=user, chat=chat, start_index=0, end_index=2).pk,
        "recap_id": Recap.objects.create(user=user, chat=chat, away_since="2026-11-01T00:00:00Z").pk,
        "test_id": ModelTest.objects.create(user=user, connection=connection).pk,
        "token_id": token.pk,
        "node": f"m{memory.pk}",
        "lifecycle_job_id": LifecycleJob.objects.create(user=user, type="consolidate", character=character).pk,
        "pipeline_job_id": PipelineJob.objects.create(user=user, chat=chat, tier="session").pk,
        "persona_id": Persona.objects.create(user=user, name="Secret", description="Private fact.").pk,
        "preset_id": sampler_preset_save(user=user, name="Secret", values={"temperature": 0.5}).pk,
        "lorebook_id": lorebook.pk,
        "uid": 7,
    }
    return values


def fill(route: str, values: dict) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name == "job_id":
            name = "lifecycle_job_id" if "lifecycle" in route else "pipeline_job_id"
        assert name in values, f"the tenancy sweep cannot fill <{name}> in {route}: add it to the fixture"
        return str(values[name])

    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", value, route)


def snapshot(user) -> tuple:
    """What the owner's data looks like (a write by someone else would change it)."""
    return (
        list(Chat.objects.filter(user=user).values_list("id", "title", "integrity", "message_count")),
        list(Message.objects.filter(chat__user=user).values_list("id", "mes", "extra")),
        list(
            Memory.objects.filter(user=user).exclude(kind="message").values_list("id", "content", "status", "version")
        ),
        list(Character.objects.filter(user=user).values_list("id", "name", "description")),
        list(Entity.objects.filter(user=user).values_list("id", "name")),
        list(ApiToken.objects.filter(user=user).values_list("id", "revoked_at")),
        list(Instance.objects.filter(user=user).values_list("id", "name", "priority")),
        list(Backup.objects.filter(user=user).values_list("id", "state")),
        list(Scene.objects.filter(user=user).values_list("id", "name")),
        list(Recap.objects.filter(user=user).values_list("id", "state")),
        list(PipelineJob.objects.filter(user=user).values_list("id", "state")),
        list(LifecycleJob.objects.filter(user=user).values_list("id", "state")),
        list(Persona.objects.filter(user=user).values_list("id", "name", "description", "is_default")),
        list(Lorebook.objects.filter(user=user).values_list("id", "name", "scope", "extra", "updated_at")),
        list(LorebookEntry.objects.filter(lorebook__user=user).values_list("id", "uid", "data")),
    )


def test_another_user_gets_404_for_every_address_of_my_objects(user, other_user, owned, other_api):
    other_web = Client()
    other_web.force_login(other_user)
    before = snapshot(user)
    leaks = []
    addressed = [route for route in routes() if "<" in route]
    assert len(addressed) > 80  # the sweep sees the whole site
    for route in addressed:
        path = fill(route, owned)
        client = other_api if route.startswith(API) else other_web
        for method in METHODS:
            kwargs = {"format": "json"} if route.startswith(API) else {}
            response = getattr(client, method)(path, {} if method != "get" else None, **kwargs)
            if response.status_code not in (404, 405):
                leaks.append(f"{method.upper()} {path} → {response.status_code}")
            body = response.content.decode(errors="replace")
            for secret in ("Private fact.", "sk-private", "Secret"):
                if secret in body:
                    leaks.append(f"{method.upper()} {path} shows {secret!r}")
    assert leaks == []
    assert snapshot(user) == before


def test_a_visitor_who_is_not_signed_in_gets_401_or_the_sign_in_page(owned):
    api, web = APIClient(), Client()
    wrong = []
    for route in routes():
        path = fill(route, owned)
        if route.startswith(API):
            status = api.get(path).status_code
            if status not in (401, 405):
                wrong.append(f"GET {path} → {status}")
        elif path == "/":  # the landing page: what Lorekeeper is, for someone signed out, and nothing of anyone's
            page = web.get(path).content.decode()
            if "How to start" not in page or "Private" in page:  # the owned chat's title
                wrong.append("GET / is not the landing page")
        else:
            response = web.get(path)
            if response.status_code != 405 and not (
                response.status_code == 302 and response["Location"].startswith("/accounts/login/")
            ):
                wrong.append(f"GET {path} → {response.status_code}")
    assert wrong == []


def test_every_web_form_needs_its_csrf_token(user, owned):
    """POSTs to the site without the CSRF token are refused (the API authenticates by token, or by session
    with DRF's CSRF check)."""
    web = Client(enforce_csrf_checks=True)
    web.force_login(user)
    unguarded = []
    for route in routes():
        path = fill(route, owned)
        status = web.post(path, {}).status_code
        if status not in (403, 405) and not (route.startswith("v1/") and status == 401):  # the gateway: no session
            unguarded.append(f"POST {path} → {status}")
    assert unguarded == []
