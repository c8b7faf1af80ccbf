"""Account archives: everything an account holds written to a zip (chats as SillyTavern JSONL), imported into an
empty or existing account by the sync rules, restored (bringing back what was deleted since), never losing what is
there; a bad archive is refused naming the file and line, and changes nothing."""

import io
import json
import uuid
import zipfile
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import SettingsDocument
from apps.accounts.services import settings_document_get, settings_document_patch
from apps.archives.services.archive.export import archive_write
from apps.archives.services.archive.format import ArchiveError
from apps.archives.services.archive.importing import archive_import
from apps.chats.models import Character, Chat, ChatRevision
from apps.chats.services.chats import chat_export_lines, chat_import
from apps.memories.models import Decision, Entity, Memory
from apps.memories.services.memories import memory_create, memory_update
from apps.sync.models import FeedEntry
from tests.chats.helpers import fixture_bytes
from tests.sync.instances import change, push

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(user, scripted):
    """A small account: a character with additional lorebooks, a chat with messages, memories with a chain, a
    contradiction and entities, a daily memory, settings, and a deletion."""
    chat = chat_import(user=user, stream=io.BytesIO(fixture_bytes("current_swipes.jsonl")), title="Seraphina")
    mira = chat.characters.first()
    Character.objects.filter(pk=mira.pk).update(extra_books=["Harbour", "Sea"])  # its Additional Lorebooks
    old = memory_create(user=user, kind="fact", content="Mira lives by the sea.", character=mira)
    new = memory_create(
        user=user, kind="fact", content="Mira moved inland.", character=mira, entities=[{"name": "Mira"}]
    )
    Memory.objects.filter(pk=old.pk).update(superseded_by=new, status="retired", retired_reason="superseded")
    doubt = memory_create(user=user, kind="fact", content="Mira never left the sea.", character=mira)
    new.contradicts.add(doubt)
    summary = memory_create(user=user, kind="summary", content="They met in the glade.", chat=chat)
    gone = memory_create(user=user, kind="fact", content="Mira fears owls.", character=mira)
    push(user, "laptop", change("delete", gone.uid, {"server": 1, "laptop": 1}))
    day = memory_create(
        user=user, kind="daily", content="- Met Rowan [chat:1]", character=mira, data={"period": "2026-11-20"}
    )
    document = settings_document_get(user=user)
    settings_document_patch(
        user=user, patch={"st_bme": {"mode": "manual"}}, kind="merge", integrity=document.integrity
    )
    return {
        "chat": chat,
        "mira": mira,
        "old": old,
        "new": new,
        "doubt": doubt,
        "summary": summary,
        "gone": gone,
        "day": day,
    }


def written(user) -> io.BytesIO:
    target = io.BytesIO()
    archive_write(user=user, target=target)
    target.seek(0)
    return target


def test_an_archive_holds_the_whole_account(user, account):
    archive = zipfile.ZipFile(written(user))
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["format"] == "lorekeeper-archive" and manifest["version"] == 1
    assert manifest["counts"] == {
        "characters": 1, "chats": 1, "messages": account["chat"].message_count, "memories": 6, "decisions": 0,
        "lorebooks": 0, "tombstones": 1,
    }  # fmt: skip
    chat = account["chat"]
    assert archive.read(f"chats/{chat.uid}.jsonl") == b"".join(chat_export_lines(chat=Chat.objects.get(pk=chat.pk)))
    memories = {row["uid"]: row for row in map(json.loads, archive.read("memories.jsonl").splitlines())}
    old = memories[str(account["old"].uid)]
    assert old["superseded_by"] == str(account["new"].uid) and old["character"] == str(account["mira"].uid)
    assert memories[str(account["new"].uid)]["contradicts"] == [str(account["doubt"].uid)]
    assert memories[str(account["summary"].uid)]["chat"] == str(chat.uid)
    assert not any(row["kind"] == "message" for row in memories.values())
    assert json.loads(archive.read("settings.json"))["document"] == {"st_bme": {"mode": "manual"}}
    (tombstone,) = map(json.loads, archive.read("tombstones.jsonl").splitlines())
    assert tombstone["uid"] == str(account["gone"].uid)


def test_an_archive_imported_into_an_empty_account_brings_everything(user, other_user, account, scripted):
    counts = archive_import(user=other_user, source=written(user))
    assert counts["characters"] == {"created": 1} and counts["chats"] == {"created": 1}
    assert counts["memories"] == {"created": 5, "deleted here": 0} or counts["memories"]["created"] == 6
    chat = Chat.objects.get(user=other_user)
    assert chat.message_count == account["chat"].message_count and chat.title == "Seraphina"
    assert b"".join(chat_export_lines(chat=chat)) == b"".join(chat_export_lines(chat=account["chat"]))
    mira = Character.objects.get(user=other_user)
    assert mira.uid != account["mira"].uid  # another account holds that uid: a new one here
    assert list(chat.characters.all()) == [mira] and mira.extra_books == ["Harbour", "Sea"]
    old = Memory.objects.get(user=other_user, content="Mira lives by the sea.")
    new = Memory.objects.get(user=other_user, content="Mira moved inland.")
    assert old.superseded_by == new and old.status == "retired" and old.character == mira
    assert [m.content for m in new.contradicts.all()] == ["Mira never left the sea."]
    assert [e.name for e in new.entities.all()] == ["Mira"]
    assert Memory.objects.get(user=other_user, kind="summary").chat == chat
    assert SettingsDocument.objects.get(user=other_user).data == {"st_bme": {"mode": "manual"}}


def test_a_restore_brings_back_what_was_deleted_and_keeps_later_edits(user, account):
    backup = written(user)
    memory_update(memory=account["new"], data={"content": "Mira moved to the hills."})
    push(user, "laptop", change("delete", account["doubt"].uid, {"server": 1, "laptop": 1}))
    Chat.objects.filter(pk=account["chat"].pk).delete()
    counts = archive_import(user=user, source=backup, restore=True)
    assert Memory.objects.get(pk=account["new"].pk).content == "Mira moved to the hills."  # newer than the backup
    doubt = Memory.objects.get(pk=account["doubt"].pk)
    assert doubt.status == "active" and FeedEntry.objects.get(uid=doubt.uid).deleted_at is None
    assert counts["memories"]["revived"] >= 1
    chat = Chat.objects.get(user=user)
    assert chat.uid == account["chat"].uid and chat.message_count == account["chat"].message_count
    # The summary was the deleted chat's: it comes back with the chat.
    assert Memory.objects.get(user=user, kind="summary").chat == chat


def test_a_merge_keeps_deleted_things_deleted(user, account):
    backup = written(user)
    push(user, "laptop", change("delete", account["doubt"].uid, {"server": 1, "laptop": 1}))
    counts = archive_import(user=user, source=backup)
    assert Memory.objects.get(pk=account["doubt"].pk).status == "retired"
    assert counts["memories"]["deleted here"] >= 1


def test_a_chat_changed_since_is_kept_and_the_archives_version_saved_beside_it(user, account):
    from apps.chats.services.messages import message_append

    backup = written(user)
    chat = Chat.objects.get(pk=account["chat"].pk)
    message_append(chat=chat, data={"name": "User", "is_user": True, "mes": "One more line."})
    archive_import(user=user, source=backup)
    chat.refresh_from_db()
    assert chat.message_count == account["chat"].message_count + 1
    (revision,) = ChatRevision.objects.filter(chat=chat)
    assert revision.reason.startswith("imported archive")
    # A restore does the opposite, keeping the current version as a revision.
    archive_import(user=user, source=backup, restore=True)
    chat.refresh_from_db()
    assert chat.message_count == account["chat"].message_count
    assert ChatRevision.objects.filter(chat=chat, reason="before restoring a backup").count() == 1


def test_importing_the_same_archive_twice_changes_nothing_more(user, other_user, account):
    backup = written(user).getvalue()
    archive_import(user=other_user, source=io.BytesIO(backup))
    before = sorted(Memory.objects.filter(user=other_user).exclude(kind="message").values_list("content", "status"))
    counts = archive_import(user=other_user, source=io.BytesIO(backup))
    after = sorted(Memory.objects.filter(user=other_user).exclude(kind="message").values_list("content", "status"))
    assert before == after and Chat.objects.filter(user=other_user).count() == 1
    # Each memory is the same, or deleted in the archive's account (its tombstone came along and holds here).
    assert set(counts["memories"]) == {"same", "deleted here"} and counts["chats"] == {"same": 1}


def _zip(**files: bytes | str) -> io.BytesIO:
    target = io.BytesIO()
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr("manifest.json", json.dumps({"format": "lorekeeper-archive", "version": 1}))
        for name, content in files.items():
            archive.writestr(name.replace("__", "."), content)
    target.seek(0)
    return target


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (io.BytesIO(b"not a zip"), "not a zip file"),
        (_zip(characters__jsonl='{"uid": "x", "name": "A"}'), "characters.jsonl, line 1: uid is not a uuid"),
        (
            _zip(characters__jsonl=json.dumps({"uid": str(uuid.uuid4()), "name": "A"}) + "\n[1]"),
            "characters.jsonl, line 2",
        ),
        (
            _zip(
                memories__jsonl=json.dumps(
                    {"uid": str(uuid.uuid4()), "kind": "fact", "content": "x", "occurred_at": "0001-01-01T05:00:00Z"}
                )
            ),
            "memories.jsonl, line 1: occurred_at",
        ),
        (
            _zip(characters__jsonl=json.dumps({"uid": str(uuid.uuid4()), "name": "A"}) + '\n{"uid": 1,}'),
            "characters.jsonl, line 2: not JSON (Expecting property name enclosed in double quotes at column 11)",
        ),
        (
            _zip(memories__jsonl=json.dumps({"uid": str(uuid.uuid4()), "kind": "message", "content": "x"})),
            "line 1: kind",
        ),
        (
            _zip(
                memories__jsonl=json.dumps(
                    {"uid": str(uuid.uuid4()), "kind": "fact", "content": "x", "character": str(uuid.uuid4())}
                )
            ),
            "character is not in the archive",
        ),
    ],
)
def test_a_bad_archive_names_the_file_and_line_and_changes_nothing(user, account, source, message):
    before = (Memory.objects.count(), Character.objects.count(), Chat.objects.count(), Entity.objects.count())
    with pytest.raises(ArchiveError) as error:
        archive_import(user=user, source=source)
    assert message in error.value.message and error.value.extra["field"] == "archive"
    assert (Memory.objects.count(), Character.objects.count(), Chat.objects.count(), Entity.objects.count()) == before


def test_an_archive_of_another_kind_is_refused(user):
    target = io.BytesIO()
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr("manifest.json", json.dumps({"format": "something-else"}))
    target.seek(0)
    with pytest.raises(ArchiveError, match="not a Lorekeeper archive"):
        archive_import(user=user, source=target)


def test_memories_imported_keep_when_they_were_made(user, other_user, account):
    made = timezone.now() - timedelta(days=40)
    Memory.objects.filter(user=user).update(created_at=made)
    archive_import(user=other_user, source=written(user))
    imported = Memory.objects.filter(user=other_user).exclude(kind="message")
    assert imported.count() == 6 and set(imported.values_list("created_at", flat=True)) == {made}


def test_a_memorys_decisions_come_with_it_and_twice_imported_are_not_doubled(user, other_user, account):
    made = timezone.now() - timedelta(days=3)
    Decision.objects.create(
        user=user, memory=account["new"], related=account["old"], outcome="superseded", kind="fact",
        content="Mira moved inland.", method="embedding", similarity=0.71, scores={"cue": "moved"},
        reason="same topic as #1 and a state change", created_at=made,
    )  # fmt: skip
    Decision.objects.filter(user=user).update(created_at=made)
    Decision.objects.create(user=user, outcome="rejected", kind="fact", content="Mira lives by the sea!",
                            related=account["old"], reason="same text")  # fmt: skip
    backup = written(user).getvalue()
    assert len(zipfile.ZipFile(io.BytesIO(backup)).read("decisions.jsonl").splitlines()) == 2

    counts = archive_import(user=other_user, source=io.BytesIO(backup))

    assert counts["decisions"] == {"created": 2}
    new = Memory.objects.get(user=other_user, content="Mira moved inland.")
    old = Memory.objects.get(user=other_user, content="Mira lives by the sea.")
    superseded = Decision.objects.get(user=other_user, outcome="superseded")
    assert (superseded.memory, superseded.related, superseded.created_at) == (new, old, made)
    assert (superseded.similarity, superseded.scores, superseded.method) == (0.71, {"cue": "moved"}, "embedding")
    assert Decision.objects.get(user=other_user, outcome="rejected").related == old
    assert archive_import(user=other_user, source=io.BytesIO(backup))["decisions"] == {"same": 2}
    assert archive_import(user=user, source=io.BytesIO(backup), restore=True)["decisions"] == {"same": 2}
    assert Decision.objects.filter(user=other_user).count() == 2 and Decision.objects.filter(user=user).count() == 2
