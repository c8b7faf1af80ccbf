"""Prompt templates, versioned files beside the code that uses them: `apps/<app>/prompts/<name>.v<N>.txt`.

A file holds a `### system` and a `### user` section (lines before the first are a comment); `$name` placeholders
(string.Template) are filled at render time, so JSON braces need no escaping. A changed prompt is a new file with the
next version, never an edit of a released one: every call records `name@vN`, and old answers stay explainable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template

from django.apps import apps

_FILE = re.compile(r"^(?P<name>[a-z0-9_]+)\.v(?P<version>\d+)\.txt$")
_SECTION = re.compile(r"^### (system|user)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    system: str
    user: str

    @property
    def ref(self) -> str:
        return f"{self.name}@v{self.version}"

    def render(self, **values: object) -> list[dict[str, str]]:
        text = {key: str(value) for key, value in values.items()}
        messages = []
        if self.system:
            messages.append({"role": "system", "content": Template(self.system).substitute(text)})
        messages.append({"role": "user", "content": Template(self.user).substitute(text)})
        return messages


def _parse(path: Path, name: str, version: int) -> Prompt:
    parts = _SECTION.split(path.read_text(encoding="utf-8"))
    sections = {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
    if "user" not in sections:
        raise ValueError(f"{path}: no '### user' section")
    return Prompt(name, version, sections.get("system", ""), sections["user"])


@cache
def prompt_versions(app_label: str) -> dict[str, dict[int, Path]]:
    folder = Path(apps.get_app_config(app_label).path) / "prompts"
    found: dict[str, dict[int, Path]] = {}
    for path in sorted(folder.glob("*.txt")):
        match = _FILE.match(path.name)
        if match:
            found.setdefault(match["name"], {})[int(match["version"])] = path
    return found


@cache
def prompt_get(app_label: str, name: str, version: int | None = None) -> Prompt:
    """The named prompt of an app, its newest version unless one is pinned."""
    versions = prompt_versions(app_label).get(name)
    if not versions:
        raise LookupError(f"No prompt {name!r} in {app_label}/prompts")
    chosen = version if version is not None else max(versions)
    if chosen not in versions:
        raise LookupError(f"No version {chosen} of prompt {name!r} in {app_label}/prompts")
    return _parse(versions[chosen], name, chosen)
