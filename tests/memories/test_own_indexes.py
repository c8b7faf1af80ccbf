"""HNSW indexes of a user's own (apps/memories/services/own_indexes.py): built when a user has many vectors of an
indexed dimension, walked by search whatever the user's share of the table, dropped when the user shrinks."""

from unittest.mock import ANY

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from apps.memories import tasks
from apps.memories.models import Memory
from apps.memories.search import memory_search
from apps.memories.search.candidates import own_index_name, own_index_state
from apps.memories.services.indexing import memories_embed_pending
from apps.memories.services.memories import memory_create
from apps.memories.services.own_indexes import own_index_due, own_index_users, own_indexes_list, own_indexes_refresh
from apps.memories.services.settings import embedding_settings_set
from tests.chats.factories import CharacterFactory
from tests.memories.helpers import hnsw_indexes, unit

pytestmark = pytest.mark.django_db(transaction=True)  # indexes are built concurrently: outside any transaction


@pytest.fixture(autouse=True)
def _no_index_left():
    """Emptying the tables after a test leaves its indexes: a later test's user of the same id would inherit one."""
    yield
    for user_id in own_index_users():
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {own_index_name(user_id, 384)}")


def _memories(server, user, character, count: int, *, lean: float) -> list[Memory]:
    made = []
    for i in range(count):
        content = f"Memory {i} of {user.username}."
        server.vectors[content] = unit(lean, 1 + i / 10, 0.5 * (i % 3), dim=384)
        made.append(memory_create(user=user, character=character, kind="fact", content=content))
    memories_embed_pending(user_id=user.pk)
    return made


def _index_names(node: dict):
    if node.get("Index Name"):
        yield node["Index Name"]
    for child in node.get("Plans", []):
        yield from _index_names(child)


def _knn_indexes(user, query: str) -> set[str]:
    """The indexes the vector ranking of one search scans (in one transaction, so all on this connection)."""
    used: set[str] = set()

    def explained(execute, sql, params, many, context):
        if "<=>" in sql:
            cursor = context["cursor"].cursor
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            used.update(_index_names(cursor.fetchone()[0][0]["Plan"]))
        return execute(sql, params, many, context)

    with transaction.atomic(), connection.execute_wrapper(explained):
        memory_search(user=user, query=query)
    return used


def test_a_user_past_the_threshold_gets_an_index_of_their_own_that_search_walks(
    user, other_user, start_embedder, settings
):
    # Past exact_max, and a small share of the table: without an index of their own, an exact scan.
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "exact_max": 2, "own_index_min": 8}
    server = start_embedder(dim=384)
    for person in (user, other_user):
        embedding_settings_set(user=person, provider="openai", model="wide", base_url=f"{server.url}/v1")
    name = own_index_name(user.pk, 384)
    mine = _memories(server, user, CharacterFactory(user=user), 7, lean=0.2)
    _memories(server, other_user, CharacterFactory(user=other_user), 7, lean=0.9)
    assert own_index_state(name) is None and not own_index_due(user_id=user.pk)

    # The eighth vector: the embedding run that made it sends the build (tasks run at once here).
    mine += _memories(server, user, Memory.objects.get(pk=mine[0].pk).character, 1, lean=0.3)

    assert own_index_state(name) == "valid" and own_index_users() == [user.pk]
    assert hnsw_indexes()[name][1] == ["m=12", "ef_construction=48"]  # apps/memories/models.py HNSW_OPTIONS
    assert not own_index_due(user_id=user.pk) and own_indexes_refresh(user_id=user.pk) == {}
    server.vectors["qzx"] = unit(0.2, 1.3, 0.5, dim=384)
    with connection.cursor() as cursor:
        # On a table this small a sort of the user's rows costs less than any index; without sorting, the order
        # must come from an HNSW index, and the user's own is the one that holds only their rows.
        cursor.execute("SET enable_sort = off")
        try:
            assert _knn_indexes(user, "qzx") == {name}
        finally:
            cursor.execute("RESET enable_sort")
    # Moderators see it above the memory list: whose, its dimension, in use, the user's vectors.
    assert own_indexes_list() == [
        {"user_id": user.pk, "username": user.username, "dim": 384, "state": "valid", "vectors": 8, "bytes": ANY}
    ]
    walked = [hit.memory.pk for hit in memory_search(user=user, query="qzx").results]
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "exact_max": 1000}
    exact = [hit.memory.pk for hit in memory_search(user=user, query="qzx").results]
    assert walked == exact and set(walked) <= {memory.pk for memory in mine}


def test_an_index_of_their_own_is_dropped_when_the_user_falls_under_half_the_threshold(user, start_embedder, settings):
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "own_index_min": 6}
    server = start_embedder(dim=384)
    embedding_settings_set(user=user, provider="openai", model="wide", base_url=f"{server.url}/v1")
    mine = _memories(server, user, CharacterFactory(user=user), 6, lean=0.2)
    assert own_index_state(own_index_name(user.pk, 384)) == "valid"

    Memory.objects.filter(pk__in=[memory.pk for memory in mine[:3]]).delete()
    assert not own_index_due(user_id=user.pk) and own_indexes_refresh(user_id=user.pk) == {}  # 3: half, kept
    Memory.objects.filter(pk=mine[3].pk).delete()

    assert own_index_due(user_id=user.pk)
    assert tasks.sweep()["own_indexes"] == 1  # the sweep sends the drop (tasks run at once here)
    assert own_index_state(own_index_name(user.pk, 384)) is None and own_index_users() == []


def test_the_admin_memory_list_shows_each_index_of_a_users_own(user, client, start_embedder, settings):
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "own_index_min": 3}
    staff = get_user_model().objects.create_superuser(username="mod", password="moderator pass 1")
    client.force_login(staff)
    page = client.get("/admin/memories/memory/")
    assert page.status_code == 200 and "No user has one" in page.content.decode()

    server = start_embedder(dim=384)
    embedding_settings_set(user=user, provider="openai", model="wide", base_url=f"{server.url}/v1")
    _memories(server, user, CharacterFactory(user=user), 3, lean=0.2)
    page = client.get("/admin/memories/memory/").content.decode()
    row = page[page.index("<td>" + user.username) :].split("</tr>")[0]
    assert "<td>384</td>" in row and "in use" in row and "<td>3</td>" in row
