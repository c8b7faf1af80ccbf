"""Every cursor-paginated list (apps/common/pagination.py): a cursor a client made up or changed is refused as an
invalid cursor, on every list, and the cursors the lists give still page through them."""

import base64
from urllib.parse import quote

import pytest

from apps.chats.models import Character
from apps.chats.services.chats import chat_create
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db

LISTS = [
    "/api/v1/chats/",
    "/api/v1/characters/",
    "/api/v1/personas/",
    "/api/v1/memories/",
    "/api/v1/entities/",
    "/api/v1/llm/calls/",
    "/api/v1/memories/lifecycle/jobs/",
    "/api/v1/extraction/model-tests/",
]


def cursor(text: str) -> str:
    return quote(base64.b64encode(text.encode()).decode())


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("position", ["abc", "1e309", "NaN", "1.5", "true", "\x00", "9" * 5000, "-1", "9" * 19])
def test_a_cursor_whose_position_is_not_an_id_is_a_404_invalid_cursor(api, path, position):
    response = api.get(f"{path}?cursor={cursor(f'p={position}')}")
    assert response.status_code == 404, response.content[:300]
    assert response.json()["detail"] == "Invalid cursor"


def test_a_chats_pipeline_jobs_refuse_a_changed_cursor_too(api, user):
    chat = chat_create(user=user, title="Jobs")
    response = api.get(f"/api/v1/chats/{chat.pk}/pipeline/jobs/?cursor={cursor('r=1&p=abc')}")
    assert response.status_code == 404 and response.json()["detail"] == "Invalid cursor"


def test_the_cursors_a_list_gives_page_through_it_and_an_id_past_any_there_is_pages_nothing(api, user):
    CharacterFactory.create_batch(5, user=user)
    first = api.get("/api/v1/characters/?limit=2").json()
    second = api.get(first["next"]).json()
    third = api.get(second["next"]).json()
    seen = [c["id"] for page in (first, second, third) for c in page["results"]]
    assert seen == sorted(Character.objects.filter(user=user).values_list("id", flat=True), reverse=True)
    assert third["next"] is None
    past = api.get(f"/api/v1/characters/?cursor={cursor('r=1&p=' + '9' * 18)}")  # an id, past any there is
    assert past.status_code == 200 and past.json()["results"] == []
