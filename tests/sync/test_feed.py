"""The sync feed: every write to a memory, character or the settings document reaches it (whatever code path made
it), the server's own writes count in the clocks, deletions leave tombstones, pulls page through it in order and
never skip a change that commits after them, and tombstones are collected once every instance is past them."""

import threading
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections, transaction

from apps.accounts.services import settings_document_get, settings_document_patch
from apps.chats.models import Chat
from apps.chats.services.characters import character_delete, character_update
from apps.chats.services.chats import chat_create, chat_delete
from apps.memories.models import Memory
from apps.memories.services.memories import memory_create, memory_restore, memory_retire, memory_update
from apps.sync.models import FeedEntry, Instance
from apps.sync.services.feed import tombstones_collect
from apps.sync.services.instances import instance_register, instance_remove
from tests.sync.instances import change, of, pull, push

pytestmark = pytest.mark.django_db


@pytest.fixture
def fact(user, character, scripted):
    return memory_create(user=user, kind="fact", content="Mira keeps a lantern.", character=character)


def entry(obj) -> FeedEntry:
    return FeedEntry.objects.get(uid=obj.uid)


def test_a_memory_made_on_the_server_is_on_the_feed_counted_as_the_servers(fact):
    fact.refresh_from_db()
    assert fact.clock == {"server": 1}
    assert fact.changed_by == "" and fact.changed_at is not None
    assert entry(fact).seq is None and entry(fact).deleted_at is None  # ordered by the next pull


def test_every_write_path_counts_a_server_version_and_puts_it_back_on_the_feed(user, fact):
    pull(user, "laptop")
    assert entry(fact).seq is not None
    memory_update(memory=fact, data={"content": "Mira keeps two lanterns."})
    fact.refresh_from_db()
    assert fact.clock == {"server": 2} and entry(fact).seq is None
    pull(user, "laptop")
    Memory.objects.filter(pk=fact.pk).update(importance=3)  # a bulk update, as the lifecycle makes
    fact.refresh_from_db()
    assert fact.clock == {"server": 3} and entry(fact).seq is None


def test_what_sync_does_not_carry_changes_nothing_on_the_feed(user, fact):
    pull(user, "laptop")
    before = entry(fact).seq
    Memory.objects.filter(pk=fact.pk).update(unconfirmed_count=4, embedding_model="x")
    fact.refresh_from_db()
    assert fact.clock == {"server": 1} and entry(fact).seq == before


def test_message_memories_stay_off_the_feed(user, character, scripted):
    from apps.chats.services.messages import message_append
    from apps.memories.services.indexing import chat_index_messages

    chat = chat_create(user=user, title="Lantern", character_ids=[character.pk], user_name="Rowan")
    message_append(chat=chat, data={"name": "Mira", "mes": "The lantern went out."})
    chat_index_messages(chat_id=chat.pk)
    assert Memory.objects.filter(chat=chat, kind="message").exists()
    assert not FeedEntry.objects.filter(type="memory").exists()


def test_deleting_a_chat_leaves_tombstones_of_its_memories(user, character, scripted):
    chat = chat_create(user=user, title="Lantern", character_ids=[character.pk], user_name="Rowan")
    summary = memory_create(user=user, kind="summary", content="They met at the tower.", chat=chat)
    chat_delete(chat=Chat.objects.get(pk=chat.pk))
    tombstone = entry(summary)
    assert tombstone.deleted_at is not None and tombstone.seq is None
    assert tombstone.clock == {"server": 2}
    items, _ = pull(user, "laptop")
    assert of(items, summary.uid) == [
        {
            "type": "memory",
            "uid": str(summary.uid),
            "deleted": True,
            "clock": {"server": 2},
            "deleted_at": tombstone.deleted_at.isoformat(),
            "deleted_by": "",
            "seq": entry(summary).seq,
        }
    ]


def test_deleting_a_character_leaves_tombstones_of_it_and_its_memories(user, character, fact):
    character_delete(character=character)
    assert entry(character).deleted_at is not None and entry(fact).deleted_at is not None


def test_character_edits_and_settings_patches_count_as_the_servers(user, character):
    character_update(character=character, data={"personality": "Stubborn."})
    character.refresh_from_db()
    assert character.clock == {"server": 2}
    document = settings_document_get(user=user)
    settings_document_patch(user=user, patch={"st_bme": {"on": True}}, kind="merge", integrity=document.integrity)
    document.refresh_from_db()
    assert document.clock == {"server": 2} and entry(document).seq is None


def test_deleting_an_account_takes_its_feed_with_it(user, fact):
    user_id = user.pk
    get_user_model().objects.get(pk=user_id).delete()  # memories go first, leaving tombstones; then the user
    assert not FeedEntry.objects.filter(user_id=user_id).exists()


def test_a_full_pull_pages_through_everything_in_order(user, character, scripted):
    made = [memory_create(user=user, kind="fact", content=f"Fact {i}.", character=character) for i in range(7)]
    items, cursor = pull(user, "laptop", limit=3)
    assert [item["uid"] for item in items if item["type"] == "memory"] == [str(m.uid) for m in made]
    assert [item["seq"] for item in items] == sorted(item["seq"] for item in items)
    assert cursor == items[-1]["seq"]
    assert Instance.objects.get(key="laptop").pulled_seq == cursor
    again, same = pull(user, "laptop", cursor=cursor)
    assert again == [] and same == cursor


def test_a_pull_brings_a_change_once_after_the_cursor(user, fact):
    _, cursor = pull(user, "laptop")
    memory_update(memory=fact, data={"content": "Mira lost her lantern."})
    items, cursor = pull(user, "laptop", cursor=cursor)
    assert [(i["uid"], i["data"]["content"]) for i in items] == [(str(fact.uid), "Mira lost her lantern.")]
    assert pull(user, "laptop", cursor=cursor)[0] == []


def test_a_pull_never_shows_another_users_objects(user, other_user, fact):
    items, _ = pull(other_user, "laptop")
    assert items == [] or all(i["type"] == "settings" for i in items)
    assert not of(items, fact.uid)


def test_memory_payload_carries_references_by_uid(user, character, scripted):
    old = memory_create(user=user, kind="fact", content="Mira lives by the sea.", character=character)
    new = memory_create(
        user=user, kind="fact", content="Mira moved inland.", character=character, entities=[{"name": "Mira"}]
    )
    Memory.objects.filter(pk=old.pk).update(superseded_by=new, status="retired")
    new.contradicts.add(old)
    items, _ = pull(user, "laptop")
    (old_item,) = of(items, old.uid)
    (new_item,) = of(items, new.uid)
    assert old_item["data"]["superseded_by"] == str(new.uid) and old_item["data"]["status"] == "retired"
    assert old_item["data"]["character"] == str(character.uid)
    assert new_item["data"]["contradicts"] == [str(old.uid)]
    assert new_item["data"]["entities"] == [{"name": "Mira", "type": "", "aliases": []}]


@pytest.mark.django_db(transaction=True)
def test_a_change_committing_after_a_pull_is_not_skipped_by_its_cursor(user, fact):
    """A writer holds its change uncommitted while a pull runs: the pull neither waits for it nor moves its
    cursor past it; once it commits, the next pull brings it."""
    _, cursor = pull(user, "laptop")
    later = memory_create(user=user, kind="fact", content="Mira found a key.", character=fact.character)
    written, release, done = threading.Event(), threading.Event(), threading.Event()

    def writer():
        try:
            with transaction.atomic():
                Memory.objects.filter(pk=fact.pk).update(content="Mira keeps a lantern and a key.")
                written.set()
                release.wait(10)
        finally:
            connections.close_all()
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    assert written.wait(10)
    items, cursor = pull(user, "laptop", cursor=cursor)  # does not wait for the writer
    assert [i["uid"] for i in items] == [str(later.uid)]
    release.set()
    done.wait(10)
    thread.join()
    items, _ = pull(user, "laptop", cursor=cursor)
    assert [(i["uid"], i["data"]["content"]) for i in items] == [(str(fact.uid), "Mira keeps a lantern and a key.")]


def test_tombstones_wait_for_every_instance_then_go(user, character, fact):
    _, cursor = pull(user, "laptop")
    pull(user, "phone")
    push(user, "laptop", change("delete", fact.uid, {"laptop": 1, "server": 1}))
    _, cursor = pull(user, "laptop", cursor=cursor)
    assert tombstones_collect() == 0  # the phone has not pulled it
    assert entry(fact).deleted_at is not None
    instance_remove(instance=Instance.objects.get(user=user, key="phone"))
    assert tombstones_collect() == 1
    assert not FeedEntry.objects.filter(uid=fact.uid).exists()
    # The memory itself stays, retired, and a late change to it is still refused.
    outcome = push(user, "laptop", change("update", fact.uid, {"laptop": 9}, content="Back again."))[0]
    assert outcome.result == "rejected" and outcome.reason == "deleted"


def test_tombstones_of_a_user_without_instances_are_collected(user, fact):
    memory = Memory.objects.get(pk=fact.pk)
    memory.delete()
    assert tombstones_collect() == 1


def test_restoring_a_memory_deleted_on_an_instance_brings_it_back_to_the_instances(user, fact):
    _, cursor = pull(user, "laptop")
    push(user, "laptop", change("delete", fact.uid, {"laptop": 1, "server": 1}))
    restored = memory_restore(memory=Memory.objects.get(pk=fact.pk))
    assert restored.status == "active"
    items, _ = pull(user, "laptop", cursor=cursor)
    (item,) = of(items, fact.uid)
    assert item["deleted"] is False and item["data"]["status"] == "active"


def test_a_memory_retired_on_the_server_travels_as_retired_not_deleted(user, fact):
    memory_retire(memory=fact)
    items, _ = pull(user, "laptop")
    (item,) = of(items, fact.uid)
    assert item["deleted"] is False and item["data"]["status"] == "retired"


def test_uids_are_unique_per_row_after_the_migration(user, character, scripted):
    made = [memory_create(user=user, kind="fact", content=f"Fact {i}.", character=character) for i in range(3)]
    assert len({m.uid for m in made}) == 3
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'sync_%'")
        # Memories, characters and lorebooks 2 each, the settings 1, a lorebook's entries 3.
        assert cursor.fetchone()[0] == 10
    assert isinstance(made[0].uid, uuid.UUID)


def test_the_tombstone_collector_runs_on_the_beat():
    from django.conf import settings

    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "sync.collect_tombstones" in tasks


def test_registering_twice_keeps_one_instance(user):
    first, created = instance_register(user=user, key="laptop", name="Laptop")
    again, created_again = instance_register(user=user, key="laptop")
    assert created and not created_again and first.pk == again.pk and again.name == "Laptop"
