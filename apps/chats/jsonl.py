"""SillyTavern JSONL: reading lines from a stream, and mapping a line's object to our columns and back.

A line's keys that SillyTavern defines are stored in typed columns when their value has the expected type; any
other key (or a known key with an unexpected type) is kept verbatim in `other_fields`; known keys the line did not
have are listed in `absent_fields`. `join_fields(split_fields(obj))` is `obj` for every JSON object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import json_problem, loads_strict, unstorable_reason


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


def _is_any(value: Any) -> bool:
    return True


FieldSpec = dict[str, tuple[Callable[[Any], bool], Callable[[], Any]]]

# key -> (does the value fit the column?, the column's value when the key is absent)
MESSAGE_FIELDS: FieldSpec = {
    "name": (_is_str, str),
    "is_user": (_is_bool, bool),
    "is_system": (_is_bool, bool),
    "send_date": (_is_any, lambda: None),
    "mes": (_is_str, str),
    "extra": (_is_dict, dict),
    "swipes": (_is_list, lambda: None),
    "swipe_id": (_is_int, lambda: None),
    "swipe_info": (_is_list, lambda: None),
}

HEADER_FIELDS: FieldSpec = {
    "user_name": (_is_str, str),
    "character_name": (_is_str, str),
    "create_date": (_is_any, lambda: None),
    "chat_metadata": (_is_dict, dict),
}


def split_fields(obj: dict[str, Any], spec: FieldSpec) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Answers (column values, other fields, absent known fields) for one line's object."""
    columns: dict[str, Any] = {}
    absent: list[str] = []
    other = {key: value for key, value in obj.items() if key not in spec}
    for key, (fits, default) in spec.items():
        if key not in obj:
            absent.append(key)
            columns[key] = default()
        elif fits(obj[key]):
            columns[key] = obj[key]
        else:
            other[key] = obj[key]
            columns[key] = default()
    return columns, other, absent


def join_fields(columns: dict[str, Any], other: dict[str, Any], absent: list[str], spec: FieldSpec) -> dict[str, Any]:
    obj = {key: columns[key] for key in spec if key not in absent and key not in other}
    obj.update(other)
    return obj


def is_header(obj: dict[str, Any]) -> bool:
    """SillyTavern headers never carry message keys; a headerless group file starts with a message."""
    return "mes" not in obj and "is_user" not in obj and "swipes" not in obj


class ImportLineError(ApplicationError):
    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"Line {line}: {problem}", {"line": line, "problem": problem})


_BOM = b"\xef\xbb\xbf"
CHUNK_SIZE = 256 * 1024
# What a file that is not a chat is, by its first bytes: people pick the wrong file, and "Line 1: not valid UTF-8"
# does not tell them which one they picked.
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image (a character card goes on the Characters page)"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive (a Lorekeeper archive goes on the Backups page)"),
    (b"\x1f\x8b", "a gzip-compressed file (unpack it first)"),
)


def not_a_chat(start: bytes) -> str | None:
    """What the file beginning with `start` is, when it is plainly not JSON lines; None when it may be."""
    for signature, kind in _SIGNATURES:
        if start.startswith(signature):
            return kind
    if start[:4] == b"RIFF" and start[8:12] == b"WEBP":
        return "a WebP image"
    first = start.lstrip().split(b"\n", 1)[0].strip()
    if first in (b"{", b"[") or first.startswith(b"["):
        return "one JSON document (a card or a settings file?), not one JSON object per line"
    return None


def iter_raw_lines(stream: BinaryIO, *, max_bytes: int | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield (1-based line number, bytes) from a binary stream, a chunk at a time (never the whole file)."""
    pending: list[bytes] = []
    line_no = 0
    total = 0
    first = True
    while True:
        chunk = stream.read(CHUNK_SIZE)
        if not chunk:
            break
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise ApplicationError(
                f"The file is larger than this server accepts ({max_bytes // (1024 * 1024)} MB).",
                {"max_bytes": max_bytes},
                status=413,
            )
        if first:
            chunk = chunk.removeprefix(_BOM)
            first = False
            kind = not_a_chat(chunk)
            if kind:
                raise ApplicationError(
                    f"This file is {kind}, not a SillyTavern chat (.jsonl).", {"field": "file", "line": 1}
                )
        parts = chunk.split(b"\n")
        for part in parts[:-1]:
            pending.append(part)
            line_no += 1
            yield line_no, b"".join(pending)
            pending = []
        pending.append(parts[-1])
    tail = b"".join(pending)
    if tail:
        yield line_no + 1, tail


def iter_objects(stream: BinaryIO, *, max_bytes: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line; a line that is not a storable JSON object raises."""
    for line_no, raw in iter_raw_lines(stream, max_bytes=max_bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportLineError(line_no, f"not valid UTF-8 (byte {exc.start + 1})") from exc
        if not text.strip():
            continue
        try:
            obj = loads_strict(text)
        except (ValueError, RecursionError) as exc:
            raise ImportLineError(line_no, f"not valid JSON: {json_problem(exc, line=False)}") from exc
        if not isinstance(obj, dict):
            raise ImportLineError(line_no, f"expected a JSON object, found {type(obj).__name__}")
        reason = unstorable_reason(obj, text)
        if reason:
            raise ImportLineError(line_no, reason)
        yield line_no, obj
