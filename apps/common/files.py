"""Files written whole: a reader (another process) sees the old file or the new, never half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def written_whole(path: Path) -> Iterator[str]:
    """The name of a new file beside `path` (its folder made if missing) for the block to write, which then replaces
    `path` at once; removed instead when the block raises. Readable by all, as any file the process writes (not
    mkstemp's owner-only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
    os.close(handle)
    try:
        yield temporary
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_whole(path: Path, text: str) -> None:
    """`text` written to `path` as written_whole writes."""
    with written_whole(path) as temporary:
        Path(temporary).write_text(text)
