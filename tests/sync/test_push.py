"""Push: each change against the stored version's vector clock — applied, a retry, stale, or a conflict resolved by
the object's rule (last write wins with instance priority for ties; daily memories merge their bullets; weekly and
higher levels take the push; a person's edit overwrites) — and deletions final, through tombstones."""

import uuid

import pytest

from apps.accounts.models import SettingsDocument
from apps.accounts.services import settings_document_get
from apps.memories.models import Memory
from apps.memories.services.memories import memory_create, memory_update
from apps.sync.models import FeedEntry, Instance
from apps.sync.services.instances import instance_register
from tests.sync.instances import at, change, of, pull, push

pytestmark = pytest.mark.django_db


@pytest.fixture
def made(user, character, scripted):
    """A fact the laptop made and pushed."""
    uid = uuid.uuid4()
    (outcome,) = push(
        user,
        "laptop",
        change(
            "create",
            uid,
            {"laptop": 1},
            when=at(0),
            kind="fact",
            content="Mira keeps a lantern.",
            character=character.uid,
        ),
    )
    assert outcome.result == "applied"
    return Memory.objects.get(uid=uid)


def stored(memory) -> Memory:
    return Memory.objects.get(pk=memory.pk)


def test_a_create_stores_the_instances_version(made, character):
    assert made.content == "Mira keeps a lantern." and made.character == character
    assert made.clock == {"laptop": 1} and made.changed_by == "laptop" and made.changed_at == at(0)
    assert made.source_instance == "laptop" and made.participating_instances == ["laptop"]
    assert made.origin == "sync" and made.embedding is None  # embedded later, as any new content


def test_a_retried_push_changes_nothing(user, made, character):
    again = push(
        user,
        "laptop",
        change("create", made.uid, {"laptop": 1}, kind="fact", content="Other.", character=character.uid),
    )
    assert again[0].result == "applied" and stored(made).content == "Mira keeps a lantern."
    assert stored(made).version == 1


def test_a_change_descending_from_the_stored_one_is_applied(user, made):
    (outcome,) = push(user, "phone", change("update", made.uid, {"laptop": 1, "phone": 1}, content="Mira keeps two."))
    assert (outcome.result, outcome.clock) == ("applied", {"laptop": 1, "phone": 1})
    memory = stored(made)
    assert memory.content == "Mira keeps two." and memory.version == 2
    assert memory.participating_instances == ["laptop", "phone"] and memory.changed_by == "phone"


def test_a_change_the_stored_version_descends_from_is_stale(user, made):
    push(user, "phone", change("update", made.uid, {"laptop": 1, "phone": 2}, content="Mira keeps two."))
    (outcome,) = push(user, "laptop", change("update", made.uid, {"laptop": 1, "phone": 1}, content="Older."))
    assert (outcome.result, outcome.reason) == ("rejected", "stale")
    assert outcome.item["data"]["content"] == "Mira keeps two." and outcome.clock == {"laptop": 1, "phone": 2}
    assert stored(made).content == "Mira keeps two."


def test_concurrent_changes_the_later_wins(user, made):
    (first,) = push(
        user, "phone", change("update", made.uid, {"laptop": 1, "phone": 1}, when=at(20), content="Later.")
    )
    (second,) = push(user, "laptop", change("update", made.uid, {"laptop": 2}, when=at(10), content="Earlier."))
    assert first.result == "applied"
    assert (second.result, second.winner) == ("conflict_resolved", "server")
    assert second.clock == {"laptop": 2, "phone": 1} == stored(made).clock
    assert second.item["data"]["content"] == "Later." and stored(made).content == "Later."
    # The other order: the later one arrives second and wins.
    (third,) = push(user, "laptop", change("update", made.uid, {"laptop": 3, "phone": 1}, when=at(30), content="A."))
    (fourth,) = push(user, "phone", change("update", made.uid, {"laptop": 2, "phone": 2}, when=at(40), content="B."))
    assert third.result == "applied"
    assert (fourth.result, fourth.winner, stored(made).content) == ("conflict_resolved", "incoming", "B.")
    assert stored(made).clock == {"laptop": 3, "phone": 2}


def test_a_tie_in_the_same_second_goes_to_the_higher_priority(user, made):
    instance_register(user=user, key="phone", priority=5)
    push(user, "phone", change("update", made.uid, {"laptop": 1, "phone": 1}, when=at(10.2), content="Phone's."))
    (outcome,) = push(user, "laptop", change("update", made.uid, {"laptop": 2}, when=at(10.7), content="Laptop's."))
    assert (outcome.result, outcome.winner) == ("conflict_resolved", "server")
    assert stored(made).content == "Phone's."
    Instance.objects.filter(key="laptop").update(priority=9)
    (outcome,) = push(user, "laptop", change("update", made.uid, {"laptop": 3}, when=at(10.1), content="Laptop's."))
    assert (outcome.result, outcome.winner) == ("conflict_resolved", "incoming")


def test_a_server_edit_and_an_instance_edit_made_concurrently_conflict(user, made):
    memory_update(memory=stored(made), data={"content": "Corrected on the web."})
    assert stored(made).clock == {"laptop": 1, "server": 1}
    (outcome,) = push(user, "laptop", change("update", made.uid, {"laptop": 2}, when=at(5), content="Laptop's."))
    assert (outcome.result, outcome.winner) == ("conflict_resolved", "server")  # the web's edit is later
    assert stored(made).content == "Corrected on the web."


def test_a_persons_edit_overwrites_whatever_the_clocks(user, made):
    push(user, "phone", change("update", made.uid, {"laptop": 1, "phone": 3}, when=at(50), content="Phone's."))
    (outcome,) = push(user, "laptop", change("edit", made.uid, {"laptop": 2}, when=at(1), content="Fixed by hand."))
    memory = stored(made)
    assert outcome.result == "applied" and memory.content == "Fixed by hand."
    assert memory.edited_by == "laptop" and memory.version == 3
    assert outcome.clock == memory.clock == {"laptop": 2, "phone": 3}


def test_weekly_and_higher_take_the_push_on_a_conflict(user, character, scripted):
    uid = uuid.uuid4()
    push(user, "laptop", change("create", uid, {"laptop": 1}, kind="weekly", content="W47.", character=character.uid))
    push(user, "phone", change("update", uid, {"laptop": 1, "phone": 1}, when=at(100), content="Phone's W47."))
    (outcome,) = push(user, "laptop", change("update", uid, {"laptop": 2}, when=at(1), content="Laptop's W47."))
    assert (outcome.result, outcome.winner) == ("conflict_resolved", "incoming")
    assert Memory.objects.get(uid=uid).content == "Laptop's W47."


def test_a_daily_memory_made_twice_for_one_day_merges_by_chat_tag(user, character, scripted):
    first, second = uuid.uuid4(), uuid.uuid4()
    day = {"kind": "daily", "character": character.uid, "date": "2026-11-20"}
    push(user, "laptop", change("create", first, {"laptop": 1}, content="- Met Corvin [chat:7]\n- Lost a key", **day))
    (outcome,) = push(
        user,
        "laptop",
        change(
            "create", second, {"laptop": 2}, content="- Met Corvin again [chat:7]\n- Found the key [chat:9]", **day
        ),
    )
    memory = Memory.objects.get(uid=first)
    assert (outcome.result, outcome.uid) == ("merged", str(first))  # the day's memory keeps its uid
    assert memory.content == (
        "- Met Corvin [chat:7] [via:laptop]\n- Lost a key [via:laptop]\n- Found the key [chat:9] [via:laptop]"
    )
    assert memory.data["period"] == "2026-11-20" and not Memory.objects.filter(uid=second).exists()
    assert outcome.item["data"]["key"] == "2026-11-20_laptop"


def test_another_instances_daily_for_the_same_day_is_its_own(user, character, scripted):
    day = {"kind": "daily", "character": character.uid, "date": "2026-11-20"}
    push(user, "laptop", change("create", uuid.uuid4(), {"laptop": 1}, content="- Laptop day [chat:1]", **day))
    push(user, "phone", change("create", uuid.uuid4(), {"phone": 1}, content="- Phone day [chat:2]", **day))
    assert Memory.objects.filter(kind="daily", data__period="2026-11-20").count() == 2


def test_concurrent_changes_to_a_daily_memory_merge(user, character, scripted):
    uid = uuid.uuid4()
    day = {"kind": "daily", "character": character.uid, "date": "2026-11-20"}
    push(user, "laptop", change("create", uid, {"laptop": 1}, content="- A [chat:1]", **day))
    memory_update(memory=Memory.objects.get(uid=uid), data={"content": "- A [chat:1]\n- B [chat:2]"})
    (outcome,) = push(user, "laptop", change("update", uid, {"laptop": 2}, content="- A [chat:1]\n- C [chat:3]"))
    assert outcome.result == "merged"
    assert Memory.objects.get(uid=uid).content == "- A [chat:1]\n- B [chat:2]\n- C [chat:3] [via:laptop]"
    assert outcome.clock == Memory.objects.get(uid=uid).clock == {"laptop": 2, "server": 1}


def test_merged_content_is_embedded_again(user, character, scripted, django_capture_on_commit_callbacks):
    uid = uuid.uuid4()
    day = {"kind": "daily", "character": character.uid, "date": "2026-11-20"}
    with django_capture_on_commit_callbacks(execute=True):
        push(user, "laptop", change("create", uid, {"laptop": 1}, content="- A [chat:1]", **day))
    assert Memory.objects.get(uid=uid).embedding is not None
    with django_capture_on_commit_callbacks(execute=True):
        push(user, "laptop", change("create", uuid.uuid4(), {"laptop": 2}, content="- B [chat:2]", **day))
    memory = Memory.objects.get(uid=uid)
    assert memory.embedding is not None and memory.content.endswith("- B [chat:2] [via:laptop]")
    assert memory.content_hash == __import__("apps.memories.embeddings", fromlist=["x"]).text_hash(memory.content)


def test_a_deletion_is_final(user, made, character):
    (deleted,) = push(user, "phone", change("delete", made.uid, {"laptop": 1, "phone": 1}))
    memory = stored(made)
    assert deleted.result == "applied"
    assert (memory.status, memory.retired_reason, memory.changed_by) == ("retired", "deleted", "phone")
    tombstone = FeedEntry.objects.get(uid=made.uid)
    assert tombstone.deleted_at is not None and tombstone.deleted_by == "phone"
    # An edit made without knowing of the deletion, however late, does not bring it back…
    (late,) = push(user, "laptop", change("update", made.uid, {"laptop": 2}, when=at(10**6), content="Still here?"))
    assert (late.result, late.reason) == ("rejected", "deleted") and late.item["deleted"] is True
    # …nor does a create under the same uid.
    (again,) = push(
        user, "laptop", change("create", made.uid, {"laptop": 3}, kind="fact", content="X", character=character.uid)
    )
    assert (again.result, again.reason) == ("rejected", "deleted")
    assert stored(made).content == "Mira keeps a lantern." and stored(made).status == "retired"


def test_deleting_something_never_seen_still_guards_its_uid(user, character):
    uid = uuid.uuid4()
    assert push(user, "laptop", change("delete", uid, {"laptop": 2}))[0].result == "applied"
    (outcome,) = push(
        user, "phone", change("create", uid, {"phone": 1}, kind="fact", content="X", character=character.uid)
    )
    assert (outcome.result, outcome.reason) == ("rejected", "deleted")


def test_changing_an_unknown_memory_is_rejected(user):
    (outcome,) = push(user, "laptop", change("update", uuid.uuid4(), {"laptop": 2}, content="Who?"))
    assert (outcome.result, outcome.reason) == ("rejected", "unknown")


def test_a_memory_of_a_missing_character_is_rejected(user, character):
    (outcome,) = push(
        user, "laptop", change("create", uuid.uuid4(), {"laptop": 1}, kind="fact", content="X", character=uuid.uuid4())
    )
    assert (outcome.result, outcome.reason) == ("rejected", "character_missing")


def test_another_users_memory_is_out_of_reach(user, other_user, made, character):
    before = stored(made)
    (outcome,) = push(other_user, "laptop", change("update", made.uid, {"laptop": 5}, content="Mine now."))
    assert outcome.result == "rejected" and outcome.item is None
    (outcome,) = push(other_user, "laptop", change("delete", made.uid, {"laptop": 5}))
    assert outcome.result == "rejected"
    assert stored(made).content == before.content and stored(made).status == "active"
    assert FeedEntry.objects.get(uid=made.uid).deleted_at is None


def test_a_character_made_on_an_instance_carries_its_memories(user, scripted):
    character, fact = uuid.uuid4(), uuid.uuid4()
    outcomes = push(
        user,
        "laptop",
        change("create", character, {"laptop": 1}, type="character", name="Tobin", personality="Quiet."),
        change("create", fact, {"laptop": 1}, kind="fact", content="Tobin fishes.", character=character),
    )
    assert [o.result for o in outcomes] == ["applied", "applied"]
    assert Memory.objects.get(uid=fact).character.name == "Tobin"


def test_identity_documents_last_write_wins_with_priority(user, character):
    push(
        user,
        "phone",
        change("update", character.uid, {"server": 1, "phone": 1}, type="character", when=at(9), name="Mira P"),
    )
    (outcome,) = push(
        user,
        "laptop",
        change("update", character.uid, {"server": 1, "laptop": 1}, type="character", when=at(8), name="Mira L"),
    )
    assert (outcome.result, outcome.winner) == ("conflict_resolved", "server")
    character.refresh_from_db()
    assert character.name == "Mira P" and character.clock == {"server": 1, "phone": 1, "laptop": 1}


def test_deleting_a_character_on_an_instance_tombstones_its_memories_too(user, made, character):
    (outcome,) = push(user, "phone", change("delete", character.uid, {"server": 1, "phone": 1}, type="character"))
    assert outcome.result == "applied"
    assert FeedEntry.objects.get(uid=character.uid).deleted_by == "phone"
    assert FeedEntry.objects.get(uid=made.uid).deleted_at is not None
    assert not Memory.objects.filter(pk=made.pk).exists()


def test_settings_sync_last_write_wins_and_changes_the_documents_integrity(user):
    document = settings_document_get(user=user)
    before = document.integrity
    (outcome,) = push(
        user,
        "laptop",
        change("update", None, {"server": 1, "laptop": 1}, type="settings", document={"st_bme": {"a": 1}}),
    )
    document = SettingsDocument.objects.get(user=user)
    assert outcome.result == "applied" and outcome.uid == str(document.uid)
    assert document.data == {"st_bme": {"a": 1}} and document.integrity != before
    (outcome,) = push(
        user, "phone", change("update", None, {"server": 1, "phone": 1}, type="settings", when=at(0), document={})
    )
    assert (outcome.result, outcome.winner) == ("conflict_resolved", "server")
    assert SettingsDocument.objects.get(user=user).data == {"st_bme": {"a": 1}}


def test_a_push_moves_the_cursor_past_its_own_changes_only_when_nothing_else_came(user, made, character, scripted):
    _, cursor = pull(user, "laptop")
    push(user, "laptop", change("update", made.uid, {"laptop": 2}, content="Mine."))
    assert Instance.objects.get(key="laptop").pulled_seq > cursor
    cursor = Instance.objects.get(key="laptop").pulled_seq
    other = memory_create(user=user, kind="fact", content="Made on the web.", character=character)
    push(user, "laptop", change("update", made.uid, {"laptop": 3}, content="Mine again."))
    assert Instance.objects.get(key="laptop").pulled_seq == cursor  # the web's memory is still to pull
    items, _ = pull(user, "laptop", cursor=cursor)
    assert {i["uid"] for i in items} == {str(other.uid), str(made.uid)}


def test_a_push_of_one_memory_rewrites_only_that_memory(user, character, scripted):
    """Incremental commits: no other memory is written, and only this one goes back on the feed."""
    memories = [memory_create(user=user, kind="fact", content=f"Fact {i}.", character=character) for i in range(5)]
    pull(user, "laptop")
    before = {m.pk: (m.content, m.version, m.clock) for m in Memory.objects.filter(user=user)}
    push(user, "laptop", change("update", memories[2].uid, {"server": 1, "laptop": 1}, content="Changed."))
    after = {m.pk: (m.content, m.version, m.clock) for m in Memory.objects.filter(user=user)}
    assert [pk for pk in before if before[pk] != after[pk]] == [memories[2].pk]
    entries = FeedEntry.objects.filter(
        user=user, type="memory", seq__gt=Instance.objects.get(key="laptop").pulled_seq - 1
    )
    assert list(entries.values_list("uid", flat=True)) == [memories[2].uid]


def test_pulled_items_of_a_push_show_what_the_phone_sees(user, made):
    items, _ = pull(user, "phone")
    (item,) = of(items, made.uid)
    assert item["data"]["content"] == "Mira keeps a lantern." and item["clock"] == {"laptop": 1}
