"""The memory schema registry (apps/memories/services/schema.py): versioned steps per chat and per character, applied
in order, each once, never destructive."""

import pytest

from apps.chats.services.chats import chat_create
from apps.memories.models import Entity, MemoryScope
from apps.memories.services import schema
from tests.chats.factories import CharacterFactory, add_messages
from tests.memories.helpers import message_memories

pytestmark = pytest.mark.django_db


@pytest.fixture
def steps(monkeypatch):
    """Three recording steps in place of the registry's own, to see order and repetition."""
    calls: list[tuple[str, int]] = []

    def step(name):
        return lambda chat: calls.append((name, chat.pk))

    monkeypatch.setattr(
        schema, "CHAT_MIGRATIONS", [(1, "one", step("one")), (2, "two", step("two")), (3, "three", step("three"))]
    )
    return calls


def test_chat_schema_ensure_applies_the_steps_in_order_once_and_records_the_version(user, steps):
    chat = chat_create(user=user, title="Old chat")
    scope = schema.chat_schema_ensure(chat=chat)
    assert steps == [("one", chat.pk), ("two", chat.pk), ("three", chat.pk)]
    assert MemoryScope.objects.get(chat=chat).schema_version == scope.schema_version == 3

    schema.chat_schema_ensure(chat=chat)
    assert len(steps) == 3


def test_a_chat_at_an_older_version_gets_only_the_later_steps(user, steps):
    chat = chat_create(user=user, title="Old chat")
    MemoryScope.objects.create(chat=chat, schema_version=1)
    schema.chat_schema_ensure(chat=chat)
    assert [name for name, _ in steps] == ["two", "three"]


def test_a_failing_step_records_nothing_and_runs_again_next_time(user, steps, monkeypatch):
    chat = chat_create(user=user, title="Old chat")

    def broken(chat):
        steps.append(("broken", chat.pk))
        raise RuntimeError("interrupted")

    monkeypatch.setattr(schema, "CHAT_MIGRATIONS", [*schema.CHAT_MIGRATIONS, (4, "broken", broken)])
    with pytest.raises(RuntimeError):
        schema.chat_schema_ensure(chat=chat)
    assert not MemoryScope.objects.filter(chat=chat, schema_version__gt=0).exists()
    with pytest.raises(RuntimeError):
        schema.chat_schema_ensure(chat=chat)
    assert [name for name, _ in steps] == ["one", "two", "three", "broken"] * 2


def test_the_first_chat_step_indexes_a_chat_from_before_the_recall_layer(
    user, scripted, django_capture_on_commit_callbacks
):
    chat = chat_create(user=user, title="Old chat")
    add_messages(chat, 3)
    assert message_memories(chat) == []
    with django_capture_on_commit_callbacks(execute=True):
        scope = schema.chat_schema_ensure(chat=chat)
    assert scope.schema_version == schema.CHAT_SCHEMA_VERSION
    assert [m.content for m in message_memories(chat)] == ["Aqua: message 0", "You: message 1", "Aqua: message 2"]


def test_the_character_step_registers_the_character_as_an_entity_once(user):
    mira = CharacterFactory(user=user, name="Mira")
    corvin = CharacterFactory(user=user, name="Corvin")
    Entity.objects.create(user=user, character=corvin, name="CORVIN", type="person")
    chat = chat_create(user=user, title="Both", character_ids=[mira.pk, corvin.pk])

    schema.chat_schema_ensure(chat=chat)
    schema.chat_schema_ensure(chat=chat)
    schema.character_schema_ensure(character=mira)

    assert list(Entity.objects.filter(character=mira).values_list("name", "type")) == [("Mira", "character")]
    assert list(Entity.objects.filter(character=corvin).values_list("name", "type")) == [("CORVIN", "person")]
    assert MemoryScope.objects.get(character=mira).schema_version == schema.CHARACTER_SCHEMA_VERSION
