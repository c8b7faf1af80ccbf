"""Reading an account archive (a zip) without trusting it: every member is streamed, never read whole; the bytes
actually unpacked are counted against LOREKEEPER_MAX_ARCHIVE_BYTES as they come (a member's size in the zip's
directory is only what the zip claims, and one member may be read more than once); a JSONL line and a JSON member
are bounded by LOREKEEPER_MAX_JSON_BYTES, as a JSON request body is. Every refusal names the file (and line)."""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from django.conf import settings

from apps.archives.services.archive.format import FORMAT, VERSION, ArchiveError, size_text
from apps.common.jsonsafe import json_problem, loads_strict

# What a damaged or unusual member raises while it is unpacked (RuntimeError: an encrypted member).
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)


class ArchiveMember:
    """One member of the archive, read a chunk at a time; every byte unpacked is counted against the archive's
    budget, and a damaged member is refused naming it."""

    def __init__(self, reader: ArchiveReader, name: str) -> None:
        self.reader = reader
        self.name = name
        try:
            self.handle = reader.zip.open(name)
        except _UNREADABLE as exc:
            raise ArchiveError(f"the file cannot be unpacked ({exc})", file=name) from exc

    def _counted(self, data: bytes) -> bytes:
        self.reader.spend(len(data), self.name)
        return data

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            raise ValueError("an archive member is read a chunk at a time")
        try:
            return self._counted(self.handle.read(size))
        except _UNREADABLE as exc:
            raise ArchiveError(f"the file is damaged ({exc})", file=self.name) from exc

    def readline(self, limit: int) -> bytes:
        try:
            return self._counted(self.handle.readline(limit))
        except _UNREADABLE as exc:
            raise ArchiveError(f"the file is damaged ({exc})", file=self.name) from exc

    def close(self) -> None:
        self.handle.close()

    def __enter__(self) -> ArchiveMember:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ArchiveReader:
    def __init__(self, source: BinaryIO) -> None:
        try:
            self.zip = zipfile.ZipFile(source)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise ArchiveError("This is not a Lorekeeper archive (not a zip file).") from exc
        self.names = set(self.zip.namelist())
        self.limit = settings.LOREKEEPER_MAX_ARCHIVE_BYTES
        self.unpacked = 0
        claimed = 0
        for info in self.zip.infolist():  # what the zip owns up to is refused before anything is unpacked
            claimed += info.file_size
            if claimed > self.limit:
                raise ArchiveError(f"The archive unpacks to more than {size_text(self.limit)}.", file=info.filename)
        self.manifest: dict[str, Any] = {}
        manifest = self.json("manifest.json")
        if manifest is None:
            raise ArchiveError("The archive has no manifest.json: it is not a Lorekeeper archive.")
        if manifest.get("format") != FORMAT:
            raise ArchiveError("This is not a Lorekeeper archive.", file="manifest.json")
        if manifest.get("version") != VERSION:
            raise ArchiveError(
                f"Archive version {manifest.get('version')!r} is not one this server reads ({VERSION})."
            )
        self.manifest = manifest

    def spend(self, size: int, name: str) -> None:
        self.unpacked += size
        if self.unpacked > self.limit:
            raise ArchiveError(f"The archive unpacks to more than {size_text(self.limit)}.", file=name)

    def member(self, name: str) -> ArchiveMember | None:
        return ArchiveMember(self, name) if name in self.names else None

    def lines(self, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """(line number, object) for each non-blank line of a JSONL member (none when the member is absent)."""
        member = self.member(name)
        if member is None:
            return
        longest = settings.LOREKEEPER_MAX_JSON_BYTES
        with member:
            number = 0
            while raw := member.readline(longest + 1):
                number += 1
                if len(raw.rstrip(b"\r\n")) > longest:
                    raise ArchiveError(f"the line is longer than {size_text(longest)}", file=name, line=number)
                if not raw.strip():
                    continue
                yield number, _object(raw, file=name, line=number)

    def json(self, name: str) -> dict[str, Any] | None:
        """A JSON member holding one object (None when the member is absent), at most LOREKEEPER_MAX_JSON_BYTES."""
        member = self.member(name)
        if member is None:
            return None
        longest = settings.LOREKEEPER_MAX_JSON_BYTES
        parts, size = [], 0
        with member:
            while chunk := member.read(min(256 * 1024, longest + 1 - size)):
                parts.append(chunk)
                size += len(chunk)
                if size > longest:
                    raise ArchiveError(f"the file is larger than {size_text(longest)}", file=name)
        return _object(b"".join(parts), file=name, line=None)


def _object(raw: bytes, *, file: str, line: int | None) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8-sig" if line in (None, 1) else "utf-8")
    except UnicodeDecodeError as exc:
        raise ArchiveError(f"not UTF-8 (byte {exc.start + 1})", file=file, line=line) from exc
    try:
        value = loads_strict(text)
    except (ValueError, RecursionError) as exc:
        problem = json_problem(exc, line=line is None)
        raise ArchiveError(f"not JSON ({problem})", file=file, line=line) from exc
    if not isinstance(value, dict):
        what = "each line is a JSON object" if line is not None else "the file is a JSON object"
        raise ArchiveError(what, file=file, line=line)
    return value
