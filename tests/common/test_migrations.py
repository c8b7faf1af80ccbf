"""Models that moved between apps keep their tables and rows: a database holding data, at the schema before the move,
migrates to today's and back."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.common.models import IdempotencyRecord

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_MOVE = [("common", "0001_vector_extension"), ("sync", "0006_quiet_writes")]


def migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


def test_idempotency_records_move_from_sync_to_common_with_their_rows(user):
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old = migrate(BEFORE_MOVE).loader.project_state(BEFORE_MOVE).apps
        OldRecord = old.get_model("sync", "IdempotencyRecord")
        OldRecord.objects.create(user_id=user.pk, key="k-1", fingerprint="f" * 64, status=201, body={"id": 7})

        migrate(leaves)
        record = IdempotencyRecord.objects.get(user=user, key="k-1")
        assert (record.status, record.body, record.fingerprint) == (201, {"id": 7}, "f" * 64)
        assert IdempotencyRecord._meta.db_table == "sync_idempotencyrecord"

        back = migrate(BEFORE_MOVE).loader.project_state(BEFORE_MOVE).apps
        assert back.get_model("sync", "IdempotencyRecord").objects.filter(key="k-1").count() == 1
    finally:
        migrate(leaves)
