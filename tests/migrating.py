"""Moving a test database between migrations, for the tests that migrate one holding data to today's schema."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets) -> MigrationExecutor:
    """The database migrated to `targets`; answers an executor that sees it there."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


def leaves() -> list[tuple[str, str]]:
    """Today's schema: every app's newest migration."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()
