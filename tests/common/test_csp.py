"""Every HTML page answers with the Content-Security-Policy of apps/common/csp.py (sync and async stacks alike),
the API, an avatar and the static files keep theirs, and no template puts inline script in a page (the policy
would refuse it, so a behaviour written inline would silently stop working)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import AsyncClient, override_settings

from apps.chats.services.avatars import character_avatar_upload
from apps.common.csp import POLICY
from tests.chats.helpers import image_bytes

pytestmark = pytest.mark.django_db

PAGES = (
    "/chats/",
    "/characters/",
    "/characters/new/",
    "/personas/",
    "/memories/",
    "/memories/entities/",
    "/memories/lifecycle/",
    "/memories/settings/",
    "/memories/injection/",
    "/llm/",
    "/llm/calls/",
    "/extraction/settings/",
    "/devices/",
    "/settings/",
    "/backups/",
    "/accounts/tokens/",
    "/accounts/password_change/",
    "/welcome/",
    "/api/v1/docs/",
    "/admin/",
    "/admin/chats/chat/",
    "/admin/llm/budget/",
)


def test_the_policy_forbids_inline_script_and_eval():
    directives = dict(part.split(" ", 1) for part in POLICY.split("; "))
    assert directives["script-src"] == "'self'" and "unsafe" not in POLICY
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert directives["base-uri"] == "'self'" and directives["form-action"] == "'self'"
    assert directives["style-src"] == "'self'" and directives["connect-src"] == "'self'"


@override_settings(DEBUG=False)
def test_every_html_page_answers_with_the_policy(client, user, chat, character):
    user.is_staff = user.is_superuser = True
    user.save(update_fields=["is_staff", "is_superuser"])
    client.force_login(user)
    pages = (*PAGES, f"/chats/{chat.pk}/", f"/chats/{chat.pk}/story/", f"/characters/{character.pk}/")
    wrong = {}
    for path in pages:
        response = client.get(path)
        if response.status_code != 200 or response.get("Content-Security-Policy") != POLICY:
            wrong[path] = (response.status_code, response.get("Content-Security-Policy"))
    assert wrong == {}
    # An htmx fragment, an error page and the signed-out pages too.
    fragment = client.get(f"/chats/{chat.pk}/", headers={"HX-Request": "true"})
    assert fragment["Content-Security-Policy"] == POLICY
    assert client.get("/no/such/page/")["Content-Security-Policy"] == POLICY
    client.logout()
    for path in ("/", "/accounts/login/", "/admin/login/"):
        assert client.get(path)["Content-Security-Policy"] == POLICY, path


def test_the_async_stack_sends_the_policy_too():
    response = async_to_sync(AsyncClient().get)("/accounts/login/")
    assert response.status_code == 200 and response["Content-Security-Policy"] == POLICY


def test_the_api_answers_json_as_before(api, chat):
    listed = api.get("/api/v1/chats/")
    assert listed.status_code == 200 and listed["Content-Type"] == "application/json"
    assert "Content-Security-Policy" not in listed
    created = api.post("/api/v1/chats/", {"title": "A new one"}, format="json")
    assert created.status_code == 201, created.content
    schema = api.get("/api/v1/schema/")
    assert schema.status_code == 200 and "Content-Security-Policy" not in schema


def test_an_avatar_keeps_its_own_stricter_policy(web, character, media):
    character_avatar_upload(character=character, stream=io.BytesIO(image_bytes("PNG")))
    response = web.get(f"/characters/{character.pk}/avatar")
    assert response.status_code == 200 and response["Content-Security-Policy"] == "default-src 'none'"


INLINE = {
    "an inline <script>": re.compile(r"<script(?![^>]*\ssrc=)[^>]*>", re.I),
    "an inline event handler": re.compile(r"<[a-z][^>]*\son[a-z]+\s*=", re.I | re.S),
    "hx-on (htmx runs it with Function)": re.compile(r"\s(data-)?hx-on", re.I),
    "a js: value (htmx evaluates it)": re.compile(r"""hx-(vals|vars|headers|request)=['"]\s*(js|javascript):""", re.I),
    "an hx-trigger filter (htmx evaluates it)": re.compile(r"""hx-trigger=(["'])[^"']*\[""", re.I),
    "a javascript: URL": re.compile(r"""=\s*['"]?\s*javascript:""", re.I),
    "a style attribute": re.compile(r"<[a-z][^>]*\sstyle\s*=", re.I | re.S),
    "a <style> element": re.compile(r"<style[\s>]", re.I),
}


def test_no_template_writes_inline_script_or_style():
    root = Path(settings.BASE_DIR)
    files = [*root.joinpath("templates").rglob("*.html"), *root.joinpath("static").rglob("*.html")]
    assert len(files) > 50
    found = [
        f"{path.relative_to(root)}: {what}"
        for path in files
        for what, pattern in INLINE.items()
        if pattern.search(path.read_text())
    ]
    assert found == []
