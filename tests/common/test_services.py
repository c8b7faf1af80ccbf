"""model_update (apps/common/services.py): the one way a service sets given fields on a row."""

from __future__ import annotations

import pytest
from django.core.exceptions import FieldDoesNotExist

from apps.chats.models import Character
from apps.common.services import model_update

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
