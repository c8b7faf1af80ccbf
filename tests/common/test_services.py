"""model_update (apps/common/services.py): the one way a service sets given fields on a row; models_copy: rows made
in hundreds."""

from __future__ import annotations

import pytest
from django.core.exceptions import FieldDoesNotExist

from apps.chats.models import Character
from apps.common.services import model_update, models_copy
from apps.memories.models import Kind, Memory
from apps.sync.models import FeedEntry

pytestmark = pytest.mark.django_db


def test_model_update_saves_only_the_given_fields_that_changed(character, django_assert_num_queries):
    before = character.updated_at
    # Another writer changes the scenario meanwhile: an update that does not name it leaves it alone.
    Character.objects.filter(pk=character.pk).update(scenario="the harbour at night")
    with django_assert_num_queries(1):
        character, changed = model_update(
            instance=character,
            fields=["name", "description", "personality"],
            data={"name": "Mira", "description": "A clerk who left the harbour.", "scenario": "ignored"},
        )
    assert changed
    stored = Character.objects.get(pk=character.pk)
    assert stored.description == "A clerk who left the harbour."
    assert stored.scenario == "the harbour at night"
    assert stored.updated_at > before


def test_model_update_writes_nothing_when_nothing_changed(character, django_assert_num_queries):
    before = character.updated_at
    with django_assert_num_queries(0):
        _, changed = model_update(instance=character, fields=["name", "tags"], data={"name": "Mira"})
    assert not changed
    assert Character.objects.get(pk=character.pk).updated_at == before


def test_model_update_refuses_what_is_not_a_field(character):
    with pytest.raises(FieldDoesNotExist):
        model_update(instance=character, fields=["nickname"], data={"nickname": "M"})
    with pytest.raises(ValueError):
        model_update(instance=character, fields=["chats"], data={"chats": []})


def _memories(user, character, kind: str) -> list[Memory]:
    return [
        Memory(
            user=user,
            character=character,
            kind=kind,
            content=f"{kind} {n}",
            content_hash=f"{n:064x}",
            source_message_indices=[n],
            occurred_at=None,
        )
        for n in range(3)
    ]


def test_models_copy_stores_what_bulk_create_stores(user, character):
    models_copy(Memory, _memories(user, character, Kind.FACT))
    copied = list(Memory.objects.filter(user=user).order_by("content").values())
    # The database's triggers ran for each row: a fact is on its owner's sync feed.
    assert FeedEntry.objects.filter(user=user, type="memory", uid__in=[row["uid"] for row in copied]).count() == 3
    Memory.objects.all().delete()
    Memory.objects.bulk_create(_memories(user, character, Kind.FACT))
    created = list(Memory.objects.filter(user=user).order_by("content").values())
    varying = {"id", "uid", "created_at", "updated_at", "changed_at"}
    assert len(copied) == 3 and all(row["uid"] and row["created_at"] and row["changed_at"] for row in copied)
    assert [{k: v for k, v in row.items() if k not in varying} for row in copied] == [
        {k: v for k, v in row.items() if k not in varying} for row in created
    ]


def test_models_copy_of_nothing_writes_nothing(django_assert_num_queries):
    with django_assert_num_queries(0):
        models_copy(Memory, [])
