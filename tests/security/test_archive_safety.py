"""Account archives handled without trusting them: every member streamed and its unpacked bytes counted as they are
read (a small zip cannot take the worker's memory or run past the limit, and the refusal names the member); uploaded
archives removed once their import ends, and an account's stored archives held to a quota; every imported line
checked as the API checks what it stores, a bad one failing the import with nothing changed."""

import io
import json
import tracemalloc
import uuid
import zipfile
from pathlib import Path

import pytest

from apps.accounts.models import SettingsDocument
from apps.archives.models import Backup, BackupSettings
from apps.archives.services.archive.export import archive_write
from apps.archives.services.archive.format import ArchiveError
from apps.archives.services.archive.importing import archive_import
from apps.archives.services.backups import backup_run, backup_start, backups_due
from apps.chats.models import Character, Chat, Message
from apps.memories.models import Entity, Memory
from apps.sync.models import FeedEntry

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

MANIFEST = json.dumps({"format": "lorekeeper-archive", "version": 1})


def archive_of(files: dict[str, bytes | str]) -> bytes:
    target = io.BytesIO()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", MANIFEST)
        for name, content in files.items():
            archive.writestr(name, content)
    return target.getvalue()


def chat_lines(messages: int, size: int = 1000) -> bytes:
    header = {"user_name": "User", "character_name": "Mira", "create_date": "2024-01-01", "chat_metadata": {}}
    lines = [json.dumps(header)]
    lines += [json.dumps({"name": "Mira", "is_user": False, "mes": "x" * size}) for _ in range(messages)]
    return ("\n".join(lines) + "\n").encode()


def chat_row(file: str, **extra) -> str:
    return json.dumps({"uid": str(uuid.uuid4()), "title": "Big", "file": file, **extra}) + "\n"


def uploaded(api, data: bytes):
    upload = io.BytesIO(data)
    upload.name = "archive.zip"
    return api.post("/api/v1/backups/import", {"file": upload}, format="multipart")


def imported(api, data: bytes) -> Backup:
    response = uploaded(api, data)
    assert response.status_code == 202, response.content
    return backup_run(backup_id=response.json()["id"])


def account_state(user) -> tuple:
    """What an import may change, for "nothing changed"."""
    return (
        sorted(Character.objects.filter(user=user).values_list("uid", "name", "tags", "card_data")),
        sorted(Chat.objects.filter(user=user).values_list("uid", "title", "integrity")),
        Message.objects.filter(chat__user=user).count(),
        sorted(Memory.objects.filter(user=user).values_list("uid", "content", "status", "time_scope")),
        sorted(Entity.objects.filter(user=user).values_list("name", "aliases")),
        sorted(FeedEntry.objects.filter(user=user).values_list("uid", "seq", "deleted_at")),
        list(SettingsDocument.objects.filter(user=user).values_list("data", "clock")),
    )


# --- unpacked size, counted as it is read --------------------------------------------------------------------------


def test_a_chat_that_unpacks_past_the_limit_fails_its_job_naming_the_file_and_stores_nothing(
    user, seraphina, api, settings
):
    settings.LOREKEEPER_MAX_ARCHIVE_BYTES = 200_000
    member = f"chats/{uuid.uuid4()}.jsonl"
    data = archive_of({"chats.jsonl": chat_row(member), member: chat_lines(400)})  # 400 KB unpacked
    assert len(data) < 20_000
    before = account_state(user)
    job = imported(api, data)
    assert job.state == "failed"
    assert member in job.error and "unpacks to more than" in job.error
    assert account_state(user) == before


def test_the_unpacked_size_is_counted_as_read_not_taken_from_the_zips_directory(user, seraphina, api, settings):
    # One 150 KB member named by three chats: the zip's directory says 150 KB, reading it takes 450 KB.
    settings.LOREKEEPER_MAX_ARCHIVE_BYTES = 300_000
    member = f"chats/{uuid.uuid4()}.jsonl"
    rows = "".join(chat_row(member) for _ in range(3))
    data = archive_of({"chats.jsonl": rows, member: chat_lines(150)})
    assert sum(info.file_size for info in zipfile.ZipFile(io.BytesIO(data)).infolist()) < 200_000
    before = account_state(user)
    job = imported(api, data)
    assert job.state == "failed"
    assert job.error.startswith(f"{member}: The archive unpacks to more than")
    assert account_state(user) == before


def test_a_chat_file_is_streamed_not_read_whole(user, settings):
    """A bad second line in a chat file of 40 MB: refused naming the file and the line, having read a chunk of it;
    the memory the import took stays far below the file's size."""
    settings.LOREKEEPER_MAX_ARCHIVE_BYTES = 100 * 1024**2
    member = f"chats/{uuid.uuid4()}.jsonl"
    body = chat_lines(1) + b"{not json\n" + b'{"name": "Mira", "mes": "filler"}\n' * (40 * 1024**2 // 34)
    data = archive_of({"chats.jsonl": chat_row(member), member: body})
    del body
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveError) as error:
            archive_import(user=user, source=io.BytesIO(data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.value.message.startswith(f"{member}, line 3: not valid JSON")
    assert peak < 8 * 1024**2, f"the import took {peak / 1024**2:.1f} MB for a 40 MB chat file"
    assert not Chat.objects.filter(user=user).exists()


def test_an_overlong_line_is_refused_before_it_is_read_whole(user, seraphina, settings):
    settings.LOREKEEPER_MAX_JSON_BYTES = 100_000
    character = str(seraphina.characters.first().uid)
    line = json.dumps({"uid": str(uuid.uuid4()), "kind": "fact", "content": "y" * 200_000, "character": character})
    before = account_state(user)
    with pytest.raises(ArchiveError, match=r"^memories\.jsonl, line 1: the line is longer than"):
        archive_import(user=user, source=io.BytesIO(archive_of({"memories.jsonl": line})))
    assert account_state(user) == before


# --- uploads removed, a quota on what an account stores ------------------------------------------------------------


def test_an_uploaded_archive_is_removed_once_its_import_ends_done_or_failed(user, other_user, seraphina, api, media):
    failed = imported(api, b"not a zip")
    assert failed.state == "failed" and not failed.file
    target = io.BytesIO()
    archive_write(user=other_user, target=target)
    response = uploaded(api, target.getvalue())
    path = media / Backup.objects.get(pk=response.json()["id"]).file.name
    assert path.exists()  # kept while the import waits
    done = backup_run(backup_id=response.json()["id"])
    assert done.state == "done" and not done.file and not path.exists()
    assert Backup.objects.get(pk=done.pk).size > 0  # what was imported stays listed
    assert not list((media / f"backups/{user.pk}").iterdir())


def test_the_files_of_imports_that_ended_without_removing_them_are_removed(user, media):
    job = Backup(user=user, kind="import", trigger="upload", state="failed")
    job.file.save("upload.zip", io.BytesIO(b"left behind"), save=True)
    path = media / job.file.name
    assert path.exists()
    backups_due()
    assert not path.exists() and not Backup.objects.get(pk=job.pk).file


def test_an_upload_past_the_quota_is_refused_naming_the_field(user, seraphina, api, web, settings, media):
    backup = backup_run(backup_id=backup_start(user=user).pk)
    settings.LOREKEEPER_BACKUP_QUOTA_BYTES = backup.size + 1000
    response = uploaded(api, b"x" * 2000)
    assert response.status_code == 413
    body = response.json()
    assert body["extra"]["field"] == "file" and "quota" in body["message"]
    assert body["extra"]["used"] == backup.size
    fits = uploaded(api, b"x" * 500)  # what fits is taken, and goes once its import ends
    assert fits.status_code == 202 and backup_run(backup_id=fits.json()["id"]).state == "failed"
    page = web.post("/backups/import/", {"file": io.BytesIO(b"x" * 2000)}, HTTP_HX_REQUEST="true")
    assert page.status_code == 400 and "quota" in page.content.decode()
    followed = web.post("/backups/import/", {"file": io.BytesIO(b"x" * 2000)}, follow=True)
    assert "quota" in followed.content.decode()
    assert Backup.objects.filter(kind="import").count() == 1
    assert [p.name for p in (media / f"backups/{user.pk}").iterdir()] == [Path(backup.file.name).name]


def test_a_backup_past_the_quota_is_refused(user, seraphina, api, web, settings, media):
    first = backup_run(backup_id=backup_start(user=user).pk)
    settings.LOREKEEPER_BACKUP_QUOTA_BYTES = first.size  # full: the backup kept takes it all
    response = api.post("/api/v1/backups")
    assert response.status_code == 409
    assert response.json()["extra"] == {"field": "backup"} and "quota" in response.json()["message"]
    page = web.post("/backups/now/", HTTP_HX_REQUEST="true")
    assert page.status_code == 400 and "quota" in page.content.decode()
    # Room for the new one's request, not for the archive it makes: its job fails and stores nothing.
    settings.LOREKEEPER_BACKUP_QUOTA_BYTES = first.size + first.size // 2
    second = backup_run(backup_id=backup_start(user=user).pk)
    assert second.state == "failed" and "quota" in second.error and not second.file
    assert len(list((media / f"backups/{user.pk}").iterdir())) == 1
    # Keeping one backup, the new one replaces the old: it fits.
    BackupSettings.objects.filter(user=user).update(keep=1)
    third = backup_run(backup_id=backup_start(user=user).pk)
    assert third.state == "done", third.error
    assert not Backup.objects.filter(pk=first.pk).exists()


# --- every line checked as the API checks it -----------------------------------------------------------------------


def test_a_character_of_the_wrong_types_is_refused_and_the_character_list_still_answers(user, seraphina, api):
    line = json.dumps({"uid": str(uuid.uuid4()), "name": "Weird", "tags": 5, "card_data": "not a dict"})
    before = account_state(user)
    job = imported(api, archive_of({"characters.jsonl": line}))
    assert job.state == "failed"
    assert job.error.startswith("characters.jsonl, line 1: ")
    assert "tags:" in job.error and "card_data:" in job.error
    assert account_state(user) == before
    listed = api.get("/api/v1/characters/")
    assert listed.status_code == 200 and [c["name"] for c in listed.json()["results"]] == ["Seraphina"]


def _memory(character: str, **fields) -> str:
    return json.dumps(
        {"uid": str(uuid.uuid4()), "kind": "fact", "content": "A fact.", "character": character, **fields}
    )


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"time_scope": {"not": "a scope"}}, "time_scope"),
        ({"entities": "Mira"}, "entities"),
        ({"valid_from": "soon"}, "valid_from"),
        ({"contradicts": 5}, "contradicts"),
        ({"source_message_indices": "12"}, "source_message_indices"),
        ({"data": {"note": "nul \u0000 inside"}}, "data"),
        ({"participating_instances": [{"key": "laptop"}]}, "participating_instances"),
    ],
)
def test_a_bad_memory_fails_the_import_naming_file_line_and_field_and_changes_nothing(
    user, seraphina, api, fields, field
):
    mira = Character.objects.get(user=user)
    character = json.dumps({"uid": str(mira.uid), "name": mira.name, "clock": mira.clock})
    lines = _memory(str(mira.uid)) + "\n" + _memory(str(mira.uid), **fields) + "\n"
    before = account_state(user)
    job = imported(api, archive_of({"characters.jsonl": character, "memories.jsonl": lines}))
    assert job.state == "failed"
    assert job.error.startswith(f"memories.jsonl, line 2: {field}"), job.error
    assert account_state(user) == before  # the good first line is not kept either
    assert api.get("/api/v1/memories/").status_code == 200


@pytest.mark.parametrize(
    ("files", "start"),
    [
        ({"chats.jsonl": chat_row("chats/x.jsonl", title={"a": 1}), "chats/x.jsonl": chat_lines(1)}, "chats.jsonl"),
        ({"entities.jsonl": json.dumps({"name": "Mira", "aliases": "Mi"})}, "entities.jsonl, line 1: aliases"),
        ({"settings.json": json.dumps({"document": {}, "clock": {"laptop": -1}})}, "settings.json, line 1: clock"),
        (
            {"tombstones.jsonl": json.dumps({"type": "memory", "uid": str(uuid.uuid4()), "deleted_by": {"a": 1}})},
            "tombstones.jsonl, line 1: deleted_by",
        ),
    ],
)
def test_a_bad_line_of_any_file_fails_the_import_and_changes_nothing(user, seraphina, files, start):
    before = account_state(user)
    with pytest.raises(ArchiveError) as error:
        archive_import(user=user, source=io.BytesIO(archive_of(files)))
    assert error.value.message.startswith(start), error.value.message
    assert error.value.extra["field"] == "archive"
    assert account_state(user) == before


def test_an_archive_written_here_still_imports_whole(user, other_user, seraphina):
    target = io.BytesIO()
    archive_write(user=user, target=target)
    target.seek(0)
    counts = archive_import(user=other_user, source=target)
    assert counts["characters"] == {"created": 1} and counts["chats"] == {"created": 1}
    assert counts["memories"] == {"created": 1}
    assert Message.objects.filter(chat__user=other_user).count() == seraphina.message_count
