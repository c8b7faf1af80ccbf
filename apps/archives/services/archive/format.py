"""What both sides of an account archive share: its format's name and version (manifest.json), the error that
names the file and line an import refuses, and how work is reported as it goes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apps.common.exceptions import ApplicationError

FORMAT = "lorekeeper-archive"
VERSION = 1
BATCH = 1000  # rows read or written at a time
Progress = Callable[[str, int], None]  # (stage, percent)


def quiet(stage: str, percent: int) -> None:
    """Progress reported to no one."""


class ArchiveError(ApplicationError):
    def __init__(self, message: str, *, file: str = "", line: int | None = None) -> None:
        extra: dict[str, Any] = {"field": "archive"}
        if file:
            extra["file"] = file
        if line is not None:
            extra["line"] = line
        where = f"{file}, line {line}: " if line is not None else (f"{file}: " if file else "")
        super().__init__(f"{where}{message}", extra)


def size_text(size: int) -> str:
    if size >= 1024**2:
        return f"{size / 1024**2:,.0f} MB"
    return f"{size / 1024:,.0f} KB" if size >= 1024 else f"{size:,} bytes"
