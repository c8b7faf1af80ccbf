"""Views and APIs reach the database only through their app's selectors (reads, scoped to the user) and services
(writes), so tenancy and every query are written once (docs/ARCHITECTURE.md, "Inside an app").

Read with `ast` from every views and APIs module of the apps (`apps/<app>/views.py`, `views/`, `apis.py`, `apis/`):
no `.objects` (a manager), no call of a method that only a queryset, a manager or a model instance has (`.filter()`,
`.order_by()`, `.first()`, `.save()`, `.delete()`, `.refresh_from_db()`…), and no query expressions imported from
`django.db.models` (`Q`, `Count`, `Prefetch`). Admin actions are not covered: they are Django's admin. A serializer
may still read a relation a selector prefetched (`memory.entities.all()`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = ("apps/*/views.py", "apps/*/views/*.py", "apps/*/apis.py", "apps/*/apis/*.py")
# Methods no other object these modules handle has (dict's `values`, `update` and `get` are why those are absent).
QUERY_METHODS = {
    "aggregate",
    "annotate",
    "bulk_create",
    "bulk_update",
    "defer",
    "delete",
    "distinct",
    "exclude",
    "exists",
    "filter",
    "first",
    "get_or_create",
    "in_bulk",
    "iterator",
    "last",
    "only",
    "order_by",
    "prefetch_related",
    "raw",
    "refresh_from_db",
    "save",
    "select_for_update",
    "select_related",
    "update_or_create",
    "values_list",
}


def _modules() -> list[Path]:
    return sorted(path for pattern in PATTERNS for path in ROOT.glob(pattern))


def orm_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each database access written in the module's own code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            found.append((node.lineno, f"{ast.unparse(node)} (a manager)"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            # QuerySet.count() takes no argument; str.count and list.count take one.
            if method in QUERY_METHODS or (method == "count" and not node.args and not node.keywords):
                found.append((node.lineno, f".{method}()"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("django.db.models"):
            found.append((node.lineno, f"from {node.module} import {', '.join(a.name for a in node.names)}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "django.shortcuts":
            shortcuts = {a.name for a in node.names} & {"get_object_or_404", "get_list_or_404"}
            found += [(node.lineno, name) for name in sorted(shortcuts)]
    return sorted(found)


def test_the_rule_sees_queries_and_writes():
    source = (
        "from django.db.models import Q\n"
        "from django.shortcuts import get_object_or_404, render\n"
        "def view(request):\n"
        "    chats = Chat.objects.filter(user=request.user)\n"
        "    selectors.chat_list(user=request.user).order_by('name').first()\n"
        "    chat.save(update_fields=['title'])\n"
        "    chat.refresh_from_db()\n"
        "    n = selectors.chat_list(user=request.user).count()\n"
        "    words = text.count('a') + len({}.values())\n"
    )
    assert [what for _, what in orm_uses(source)] == [
        "from django.db.models import Q",
        "get_object_or_404",
        ".filter()",
        "Chat.objects (a manager)",
        ".first()",
        ".order_by()",
        ".save()",
        ".refresh_from_db()",
        ".count()",
    ]


def test_there_are_views_and_apis_to_check():
    assert len(_modules()) > 20


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_views_and_apis_go_through_selectors_and_services(path: Path):
    uses = orm_uses(path.read_text())
    assert not uses, f"{path.relative_to(ROOT)}: move to a selector or a service: " + "; ".join(
        f"line {line}: {what}" for line, what in uses
    )
