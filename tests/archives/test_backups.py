"""Backups: made now or on a schedule by a background job (a real worker in one test), kept up to a number,
downloaded, restored; archives uploaded and imported; the API and the Devices page; another user's backups out of
reach."""

import io
import uuid
import zipfile
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.archives.models import Backup, BackupSettings
from apps.archives.services.backups import backup_run, backup_settings_set, backup_start, backups_due
from apps.chats.models import Chat
from apps.memories.models import Memory
from tests.sync.instances import change, push
from tests.worker import celery_worker, wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def made(user, **extra) -> Backup:
    backup = backup_start(user=user, **extra)
    return backup_run(backup_id=backup.pk)


def test_a_backup_job_writes_the_archive(user, seraphina, media):
    backup = made(user)
    assert backup.state == "done" and backup.progress == 100 and backup.stage == "done"
    assert backup.counts["memories"] == 1 and backup.counts["chats"] == 1
    assert backup.size > 0 and (media / backup.file.name).exists()
    names = zipfile.ZipFile(backup.file.open("rb")).namelist()
    assert {"manifest.json", "memories.jsonl", f"chats/{seraphina.uid}.jsonl"} <= set(names)


def test_a_job_runs_once_even_if_its_task_comes_twice(user, seraphina):
    backup = made(user)
    again = backup_run(backup_id=backup.pk)
    assert again.state == "done" and again.file.name == backup.file.name


def test_only_the_newest_backups_are_kept(user, seraphina):
    backup_settings_set(user=user, data={"keep": 2})
    first = made(user)
    made(user)
    made(user)
    assert Backup.objects.filter(user=user, kind="backup").count() == 2
    assert not Backup.objects.filter(pk=first.pk).exists()


def test_one_job_at_a_time(user, seraphina):
    backup_start(user=user)
    with pytest.raises(Exception, match="already under way"):
        backup_start(user=user)


def test_automatic_backups_come_when_due(user, seraphina, django_capture_on_commit_callbacks):
    backup_settings_set(user=user, data={"mode": "automatic", "every_hours": 6})
    with django_capture_on_commit_callbacks(execute=True):
        (first,) = backups_due()
    assert Backup.objects.get(pk=first).state == "done"
    assert backups_due() == []  # the last one is recent
    Backup.objects.filter(pk=first).update(created_at=timezone.now() - timedelta(hours=7))
    assert len(backups_due()) == 1
    BackupSettings.objects.filter(user=user).update(mode="manual")
    Backup.objects.filter(user=user).update(state="done", created_at=timezone.now() - timedelta(days=3))
    assert backups_due() == []


def test_a_lost_job_is_marked_failed(user):
    job = Backup.objects.create(user=user, kind="backup", trigger="manual", state="running")
    Backup.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(hours=3))
    backups_due()
    job.refresh_from_db()
    assert job.state == "failed" and "lost" in job.error


def test_restoring_a_backup_brings_back_a_deleted_chat_and_memory(user, seraphina):
    backup = made(user)
    fact = Memory.objects.get(user=user, kind="fact")
    push(user, "laptop", change("delete", fact.uid, {"server": 1, "laptop": 1}))
    Chat.objects.filter(pk=seraphina.pk).delete()
    job = Backup.objects.create(user=user, kind="restore", trigger="manual", source=backup)
    job = backup_run(backup_id=job.pk)
    assert job.state == "done", job.error
    assert Chat.objects.filter(user=user, uid=seraphina.uid).exists()
    assert Memory.objects.get(pk=fact.pk).status == "active"


def test_a_bad_upload_fails_its_job_with_the_reason_and_changes_nothing(user, seraphina, api):
    before = Memory.objects.count()
    response = api.post("/api/v1/backups/import", {"file": io.BytesIO(b"not a zip")}, format="multipart")
    assert response.status_code == 202
    job = backup_run(backup_id=response.json()["id"])
    assert job.state == "failed" and "not a zip file" in job.error
    assert Memory.objects.count() == before


def test_backups_through_the_api(user, seraphina, api, other_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        started = api.post("/api/v1/backups")
    assert started.status_code == 202
    backup_id = started.json()["id"]
    detail = api.get(f"/api/v1/backups/{backup_id}").json()
    assert detail["state"] == "done" and detail["counts"]["chats"] == 1
    download = api.get(f"/api/v1/backups/{backup_id}/download")
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    assert "manifest.json" in zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content))).namelist()
    assert other_api.get(f"/api/v1/backups/{backup_id}").status_code == 404
    assert other_api.get(f"/api/v1/backups/{backup_id}/download").status_code == 404
    assert other_api.post(f"/api/v1/backups/{backup_id}/restore").status_code == 404
    settings = api.patch("/api/v1/backups/settings", {"mode": "automatic", "keep": 3}, format="json")
    assert settings.json() == {"mode": "automatic", "every_hours": 24, "keep": 3}
    assert api.patch("/api/v1/backups/settings", {"keep": 0}, format="json").status_code == 400
    assert api.delete(f"/api/v1/backups/{backup_id}").status_code == 204


def test_an_archive_uploaded_through_the_api_is_imported(user, other_user, seraphina, api, other_api):
    archive = made(user)
    with archive.file.open("rb") as handle:
        upload = io.BytesIO(handle.read())
    upload.name = "mine.zip"
    response = other_api.post("/api/v1/backups/import", {"file": upload}, format="multipart")
    job = backup_run(backup_id=response.json()["id"])
    assert job.state == "done", job.error
    assert job.counts["chats"] == {"created": 1}
    assert Chat.objects.filter(user=other_user).count() == 1


def test_the_devices_page_lists_devices_and_loads_the_backups_card(
    web, user, seraphina, django_capture_on_commit_callbacks
):
    push(user, "laptop", change("create", uuid.uuid4(), {"laptop": 1}, type="character", name="X"))
    with django_capture_on_commit_callbacks(execute=True):
        web.post("/backups/now/", HTTP_HX_REQUEST="true")
    page = web.get("/devices/").content.decode()
    assert "laptop" in page and 'hx-get="/backups/card/"' in page
    # The sync feed in words: what a number is, what "behind" counts.
    assert "How it works: every change you make" in page and "“Behind” below counts them" in page
    card = web.get("/backups/card/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="backups-card"' in card and "<!doctype" not in card
    assert "Back up now" in card and "Download" in card
    alone = web.get("/backups/").content.decode()  # without htmx: the card as a page of its own
    assert "<!doctype html>" in alone and "Back up now" in alone and "Download" in alone
    fragment = web.get("/backups/", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.startswith('<div id="backups"') and "every 2s" not in fragment  # nothing running: no polling
    saved = web.post("/devices/laptop/", {"name": "Laptop", "kind": "desktop", "priority": "4"})
    assert saved.status_code == 302
    assert "Laptop" in web.get("/devices/").content.decode()
    web.post("/devices/laptop/forget/")
    assert "No device has synced yet" in web.get("/devices/").content.decode()


def test_a_running_job_keeps_the_list_polling(web, user):
    Backup.objects.create(user=user, kind="backup", trigger="manual", state="running", stage="memories", progress=40)
    fragment = web.get("/backups/", HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 2s"' in fragment and 'value="40"' in fragment and "memories" in fragment


def test_another_users_backup_pages_are_404(web, other_user, seraphina):
    theirs = Backup.objects.create(user=other_user, kind="backup", trigger="manual", state="done")
    assert web.get(f"/backups/{theirs.pk}/download/").status_code == 404
    assert web.post(f"/backups/{theirs.pk}/restore/").status_code == 404
    assert web.post(f"/backups/{theirs.pk}/delete/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_backup_is_made_by_a_real_worker(user, seraphina, broker, media, django_capture_on_commit_callbacks):
    with celery_worker(broker, MEDIA_ROOT=str(media)) as worker:
        backup = backup_start(user=user)
        wait_for(
            lambda: Backup.objects.get(pk=backup.pk).state in ("done", "failed"),
            timeout=60,
            what="the backup",
            worker=worker,
        )
    backup.refresh_from_db()
    assert backup.state == "done", backup.error
    assert backup.counts["memories"] == 1 and (media / backup.file.name).exists()


def test_the_archives_of_a_deleted_account_are_removed(user, seraphina, media):
    from django.contrib.auth import get_user_model

    backup = made(user)
    path = media / backup.file.name
    assert path.exists()
    get_user_model().objects.filter(pk=user.pk).delete()
    backups_due()
    assert not path.exists()
