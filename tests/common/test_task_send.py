"""Sending a task by name works in any process (a web worker has imported no tasks module) and never fails the
caller."""

import subprocess
import sys
from pathlib import Path

from apps.common.tasks import task_send

ROOT = Path(__file__).resolve().parents[2]


def test_a_task_is_found_by_name_in_a_process_that_imported_no_tasks_module():
    script = (
        "import sys, django; django.setup(); "
        "assert 'apps.memories.tasks' not in sys.modules; "
        "from apps.common.tasks import registered; "
        "print(registered('memories.index_chat').name)"
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
    assert run.stdout.strip().splitlines()[-1] == "memories.index_chat"


def test_an_unknown_task_is_logged_not_raised(caplog):
    assert task_send("memories.no_such_task", 1) is False
    assert "could not enqueue memories.no_such_task" in caplog.text
