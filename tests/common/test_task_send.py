"""Sending a task by name works in any process (each app's AppConfig.ready registers its tasks, so a web worker
knows them as a Celery worker does) and never fails the caller."""

import subprocess
import sys
from pathlib import Path

from apps.common.tasks import task_send

ROOT = Path(__file__).resolve().parents[2]


def test_every_apps_tasks_are_registered_once_django_is_set_up():
    script = (
        "import django; django.setup(); "
        "from apps.common.tasks import registered; "
        "names = ['memories.index_chat', 'extraction.run_chat', 'archives.backup', 'sync.prune_records', "
        "'llm.prune_calls', 'lorebooks.prepare_vectors']; "
        "print(' '.join(registered(name).name for name in names))"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split()[-6:] == [
        "memories.index_chat",
        "extraction.run_chat",
        "archives.backup",
        "sync.prune_records",
        "llm.prune_calls",
        "lorebooks.prepare_vectors",
    ]


def test_an_unknown_task_is_logged_not_raised(caplog):
    assert task_send("memories.no_such_task", 1) is False
    assert "could not enqueue memories.no_such_task" in caplog.text
