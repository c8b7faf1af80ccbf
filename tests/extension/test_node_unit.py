"""The SillyTavern extension's own unit tests (clients/sillytavern/tests/*.test.mjs), run with Node's built-in test
runner: the sync planner, the three-way merge and ChatSync against an in-memory fake of Lorekeeper. No database.

Skipped when Node.js (18 or newer) is not installed, unless CI is set: there it must be."""

from __future__ import annotations

import json
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


def _module_flags(version: tuple[int, int, int]) -> list[str] | None:
    """lib/*.js are ES modules. Without a package.json saying `"type": "module"`, Node loads them as such only where
    it detects module syntax: by default since 20.19 and 22.7, behind a flag since 20.10 and 21.1. None: cannot."""
    package = EXTENSION / "package.json"
    if package.exists():
        try:
            if json.loads(package.read_text(encoding="utf-8")).get("type") == "module":
                return []
        except ValueError:
            pass
    major, minor = version[:2]
    if major >= 23 or (major == 22 and minor >= 7) or (major == 20 and minor >= 19):
        return []
    if major in (21, 22) or (major == 20 and minor >= 10):
        return ["--experimental-detect-module"]
    return None


def test_extension_node_unit_tests() -> None:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("Node.js is not installed, and CI is set: the extension's unit tests must run.")
        pytest.skip("Node.js is not installed: the extension's unit tests (clients/sillytavern/tests) did not run.")
    version = _node_version(node)
    if version is None or version < (18, 0, 0):
        pytest.skip(f"Node.js 18 or newer is needed for the extension's unit tests (found {version}).")
    flags = _module_flags(version)
    if flags is None:
        pytest.skip(
            f"Node.js {'.'.join(map(str, version))} cannot load clients/sillytavern/lib/*.js as ES modules without a "
            'package.json saying "type": "module" (Node 20.10+ can).'
        )
    files = sorted(str(path.relative_to(ROOT)) for path in TESTS.glob("*.test.mjs"))
    assert files, f"no *.test.mjs in {TESTS}"
    result = subprocess.run(
        [node, *flags, "--test", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        print(result.stdout[-200_000:])
        print(result.stderr[-50_000:])
    assert result.returncode == 0, f"node --test failed (exit {result.returncode}); its output is above"
