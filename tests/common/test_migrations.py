"""Models that moved between apps keep their tables and rows, and the permissions given on them: a database holding
data, at the schema before the moves, migrates to today's and back."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType

from apps.accounts.models import SettingsDocument
from apps.archives.models import Backup, BackupSettings
from apps.chats.models import Chat, ChatRevision, SeenGeneration
from apps.common.models import IdempotencyRecord
from tests.migrating import leaves, migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_MOVES = [
    ("common", "0001_vector_extension"),
    ("accounts", "0002_audit"),
    ("chats", "0004_client_key"),
    ("sync", "0006_quiet_writes"),
]


@pytest.mark.slow  # about 11 s: .ci/run runs it after make test
def test_models_moved_out_of_sync_keep_their_rows(user):
    today = leaves()
    chat = Chat.objects.create(user=user, title="Kept")
    try:
        old = migrate(BEFORE_MOVES).loader.project_state(BEFORE_MOVES).apps
        old.get_model("sync", "IdempotencyRecord").objects.create(
            user_id=user.pk, key="k-1", fingerprint="f" * 64, status=201, body={"id": 7}
        )
        old.get_model("sync", "ChatRevision").objects.create(
            chat_id=chat.pk, reason="forced save", integrity=chat.integrity, message_count=3, jsonl_gzip=b"gz"
        )
        old.get_model("sync", "SeenGeneration").objects.create(chat_id=chat.pk, generation_id="gen-1")
        old.get_model("sync", "SettingsDocument").objects.create(user_id=user.pk, data={"smart_memory": {"a": 1}})
        old.get_model("sync", "Backup").objects.create(user_id=user.pk, kind="backup", trigger="manual", size=5)
        old.get_model("sync", "BackupSettings").objects.create(user_id=user.pk, mode="automatic", keep=3)
        # A moderator group was given the right to see backups while they were sync's.
        moderators = Group.objects.create(name="moderators")
        old_type, _ = ContentType.objects.get_or_create(app_label="sync", model="backup")
        granted, _ = Permission.objects.get_or_create(
            content_type=old_type, codename="view_backup", defaults={"name": "Can view backup"}
        )
        moderators.permissions.add(granted)

        migrate(today)
        record = IdempotencyRecord.objects.get(user=user, key="k-1")
        assert (record.status, record.body) == (201, {"id": 7})
        revision = ChatRevision.objects.get(chat=chat)
        assert (revision.reason, revision.message_count, bytes(revision.jsonl_gzip)) == ("forced save", 3, b"gz")
        assert SeenGeneration.objects.get(chat=chat).generation_id == "gen-1"
        assert SettingsDocument.objects.get(user=user).data == {"smart_memory": {"a": 1}}
        assert Backup.objects.get(user=user).size == 5
        kept = BackupSettings.objects.get(user=user)
        assert (kept.mode, kept.keep) == ("automatic", 3)
        assert not ContentType.objects.filter(app_label="sync", model__in=["backup", "backupsettings"]).exists()
        assert moderators.permissions.filter(content_type__app_label="archives", codename="view_backup").exists()

        back = migrate(BEFORE_MOVES).loader.project_state(BEFORE_MOVES).apps
        for name in ("IdempotencyRecord", "ChatRevision", "SeenGeneration", "SettingsDocument", "Backup"):
            assert back.get_model("sync", name).objects.count() == 1, name
    finally:
        migrate(today)
