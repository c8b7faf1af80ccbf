"""The SillyTavern extension's own unit tests (clients/sillytavern/tests/*.test.mjs), run with Node's built-in test
runner: the sync planner, the three-way merge and ChatSync against an in-memory fake of Lorekeeper. No database.

Skipped when Node.js (18 or newer) is not installed, unless CI is set: there it must be."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "clients" / "sillytavern"
TESTS = EXTENSION / "tests"


def _node_version(node: str) -> tuple[int, int, int] | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(part) for part in match.groups()) if match else None  # type: ignore[return-value]


def test_extension_node_unit_tests() -> None:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("Node.js is not installed, and CI is set: the extension's unit tests must run.")
        pytest.skip("Node.js is not installed: the extension's unit tests (clients/sillytavern/tests) did not run.")
    version = _node_version(node)
    if version is None or version < (18, 0, 0):
        pytest.skip(f"Node.js 18 or newer is needed for the extension's unit tests (found {version}).")
    files = sorted(str(path.relative_to(ROOT)) for path in TESTS.glob("*.test.mjs"))
    assert files, f"no *.test.mjs in {TESTS}"
    result = subprocess.run(
        [node, "--test", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        print(result.stdout[-200_000:])
        print(result.stderr[-50_000:])
    assert result.returncode == 0, f"node --test failed (exit {result.returncode}); its output is above"
