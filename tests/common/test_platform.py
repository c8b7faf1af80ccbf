"""The platform's wiring: a real Celery worker on a real broker, production settings, manage.py beside a server."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from apps.common.tasks import ping

ROOT = Path(__file__).resolve().parent.parent.parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(extra)
    return env


@pytest.mark.slow  # about 10 s: .ci/run runs it after make test
def test_a_real_worker_consumes_tasks_from_the_embedded_valkey(broker):
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=WARNING"],
        cwd=ROOT,
        env=_env(CELERY_BROKER_URL=broker, DJANGO_SETTINGS_MODULE="config.settings.test"),
    )
    try:
        assert ping.delay("hello").get(timeout=60, disable_sync_subtasks=False) == "pong:hello"
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_production_settings_pass_the_deploy_check():
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=_env(
            DJANGO_SETTINGS_MODULE="config.settings.production",
            SECRET_KEY=secrets.token_urlsafe(60),
            ALLOWED_HOSTS="lorekeeper.example.com",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_manage_py_reaches_the_same_embedded_database_while_another_process_holds_it(db):
    # pytest itself holds the embedded server: a second process joins it rather than starting its own, and sees
    # the test database this process migrated.
    result = subprocess.run(
        [sys.executable, "manage.py", "showmigrations", "chats"],
        cwd=ROOT,
        env=_env(
            DJANGO_SETTINGS_MODULE="config.settings.local", LOREKEEPER_DATABASE_NAME=connection.settings_dict["NAME"]
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "[X] 0001_initial" in result.stdout


def test_processes_joining_and_leaving_the_embedded_server_at_once_leave_it_running_for_the_others(db):
    import json

    from apps.common import embedded

    if os.environ.get("DATABASE_URL"):
        pytest.skip("only the embedded server is shared this way")
    processes = [
        subprocess.Popen([sys.executable, "manage.py", "check"], cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL)
        for _ in range(6)
    ]
    assert [p.wait(timeout=120) for p in processes] == [0] * 6
    handles = json.loads((embedded.VAR_DIR / "pgdata" / ".handle_pids.json").read_text())
    assert os.getpid() in handles and not {p.pid for p in processes} & set(handles)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


_SHARED_BUFFERS = """
import psycopg
from apps.common import embedded
embedded.postgres_start()
with psycopg.connect(host=str(embedded.socket_dir()), user="postgres", dbname="postgres") as conn:
    print(conn.execute("SHOW shared_buffers").fetchone()[0])
"""


def test_a_new_embedded_server_gets_shared_buffers_sized_to_the_machine_from_its_second_start(tmp_path):
    def start() -> str:
        result = subprocess.run(
            [sys.executable, "-c", _SHARED_BUFFERS],
            cwd=ROOT,
            env=_env(LOREKEEPER_VAR_DIR=str(tmp_path)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    expected = max(128, min(1024, memory // 4 // 2**20))

    assert start() == "128MB"  # initdb's default, until the server restarts
    assert start() == (f"{expected // 1024}GB" if expected % 1024 == 0 else f"{expected}MB")
    (tmp_path / "pgdata" / "postgresql.auto.conf").write_text("shared_buffers = '256MB'\n")
    assert start() == "256MB"  # a size someone chose stays


_START = """
import psycopg
from apps.common import embedded
embedded.postgres_start()
with psycopg.connect(host=str(embedded.socket_dir()), user="postgres", dbname=embedded.DATABASE_NAME) as conn:
    print(conn.execute("SELECT current_database()").fetchone()[0])
"""


def test_processes_starting_at_once_on_a_new_data_folder_all_get_the_database(tmp_path):
    # make test starts two test processes at once, and a person may run manage.py commands side by side. Each looked
    # for the database (and the vector extension) and created it when it found none: all but one of them then
    # failed on the one that won.
    if os.environ.get("DATABASE_URL"):
        pytest.skip("only the embedded server is made this way")
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _START],
            cwd=ROOT,
            env=_env(LOREKEEPER_VAR_DIR=str(tmp_path)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    results = [p.communicate(timeout=180) for p in processes]
    failed = [err[-1500:] for (_, err), p in zip(results, processes, strict=True) if p.returncode != 0]
    assert not failed, failed[0]
    from apps.common import embedded

    assert [out.strip() for out, _ in results] == [embedded.DATABASE_NAME] * 6
