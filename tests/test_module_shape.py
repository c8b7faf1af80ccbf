"""The shape docs/ARCHITECTURE.md promises, checked on the code as it is: no module of the apps, the configuration or
the Python client is over 400 lines (migrations aside), and no import of another app hides inside a function (the
layers in pyproject.toml are then visible at the top of every module, where `lint-imports` and a reader see them)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("apps", "config", "clients/python")
MAX_LINES = 400


def _modules() -> list[Path]:
    return sorted(
        path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py") if "migrations" not in path.parts
    )


def hidden_imports(source: str, app: str) -> list[tuple[int, str]]:
    """(line, module) of each import of another app made inside a function of a module of `app`."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            found += [(node.lineno, name) for name in names if name.startswith("apps.") and name.split(".")[1] != app]
    return sorted(set(found))


def test_there_are_modules_to_check():
    assert len(_modules()) > 100


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split along its seams (a package): {long}"


def test_the_rule_sees_an_import_inside_a_function():
    source = "def f():\n    from apps.memories.models import Memory\n    import apps.chats.models\n"
    assert hidden_imports(source, "chats") == [(2, "apps.memories.models")]
    assert hidden_imports(source, "sync") == [(2, "apps.memories.models"), (3, "apps.chats.models")]


def test_no_import_of_another_app_hides_inside_a_function():
    hidden = {
        f"{path.relative_to(ROOT)}:{line}": name
        for path in _modules()
        if path.parts[len(ROOT.parts)] == "apps"
        for line, name in hidden_imports(path.read_text(), path.parts[len(ROOT.parts) + 1])
    }
    assert not hidden, f"import at the top of the module: {hidden}"
