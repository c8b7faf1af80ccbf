"""RFC 6902 (JSON Patch) and RFC 7386 (JSON Merge Patch) on plain Python JSON values.

Errors come in two kinds, as the sync API answers them: `PatchInvalid` (the operation itself is malformed: 400) and
`PatchConflict` (it does not fit the document as it is now: a failed `test`, a missing path, an index out of
range: 409). Both carry the operation's position in the request.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from apps.common.exceptions import ApplicationError

OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]{0,17}")  # ASCII digits, no leading zeros (RFC 6901)


class PatchError(Exception):
    def __init__(self, message: str, *, op_index: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.op_index = op_index


class PatchInvalid(PatchError):
    pass


class PatchConflict(PatchError):
    pass


def as_application_error(exc: PatchError) -> ApplicationError:
    """400 `patch_invalid` or 409 `patch_conflict`, naming the operation."""
    conflict = isinstance(exc, PatchConflict)
    where = f"Operation {exc.op_index}: " if exc.op_index is not None else ""
    return ApplicationError(
        f"{where}{exc.message}.",
        {"operation": exc.op_index},
        status=409 if conflict else 400,
        code="patch_conflict" if conflict else "patch_invalid",
    )


def parse_pointer(pointer: Any) -> list[str]:
    """RFC 6901: "" is the whole document, "/a/0" is ["a", "0"]; ~1 is "/" and ~0 is "~"."""
    if not isinstance(pointer, str):
        raise PatchInvalid("a JSON pointer must be a string")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchInvalid(f"JSON pointer {pointer!r} must start with '/'")
    tokens = pointer[1:].split("/")
    for token in tokens:
        if "~" in token.replace("~0", "").replace("~1", ""):
            raise PatchInvalid(f"JSON pointer {pointer!r} has an invalid '~' escape")
    return [token.replace("~1", "/").replace("~0", "~") for token in tokens]


def array_index(token: str, length: int, *, allow_end: bool) -> int:
    """The array position a token names; `-` (and `length` itself) only where a new element may go."""
    if token == "-" and allow_end:
        return length
    if not _ARRAY_INDEX.fullmatch(token):
        raise PatchConflict(f"{token!r} is not an array index")
    index = int(token)
    if index > length or (index == length and not allow_end):
        raise PatchConflict(f"index {index} is out of range (length {length})")
    return index


def validate_operation(op: Any) -> dict[str, Any]:
    """The operation's shape (not whether it fits the document)."""
    if not isinstance(op, dict):
        raise PatchInvalid("an operation must be a JSON object")
    name = op.get("op")
    if name not in OPERATIONS:
        raise PatchInvalid(f"unknown op {name!r}; expected one of {', '.join(OPERATIONS)}")
    parse_pointer(op.get("path"))
    if name in ("add", "replace", "test") and "value" not in op:
        raise PatchInvalid(f"'{name}' needs a 'value'")
    if name in ("move", "copy"):
        parse_pointer(op.get("from"))
    return op


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens[:-1]:
        node = _child(node, token)
    return node


def _child(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        if token not in node:
            raise PatchConflict(f"no member {token!r}")
        return node[token]
    if isinstance(node, list):
        return node[array_index(token, len(node), allow_end=False)]
    raise PatchConflict(f"cannot descend into a {type(node).__name__} with {token!r}")


def get(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens:
        node = _child(node, token)
    return node


def add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    token = tokens[-1]
    if isinstance(parent, dict):
        parent[token] = value
    elif isinstance(parent, list):
        parent.insert(array_index(token, len(parent), allow_end=True), value)
    else:
        raise PatchConflict(f"cannot add {token!r} to a {type(parent).__name__}")
    return doc


def remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchConflict("cannot remove the whole document")
    parent = _parent(doc, tokens)
    token = tokens[-1]
    if isinstance(parent, dict):
        if token not in parent:
            raise PatchConflict(f"no member {token!r} to remove")
        del parent[token]
    elif isinstance(parent, list):
        del parent[array_index(token, len(parent), allow_end=False)]
    else:
        raise PatchConflict(f"cannot remove {token!r} from a {type(parent).__name__}")
    return doc


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true != 1 and key order does not matter."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        # As JSON readers see them (doubles): PostgreSQL writes 5.360518876743166e+16 back as 53605188767431660.
        try:
            return float(a) == float(b)
        except OverflowError:  # an integer beyond any double equals no float
            return False
    return type(a) is type(b) and a == b


def apply_operation(doc: Any, op: dict[str, Any]) -> Any:
    """Apply one (validated) operation; answers the new document (the same object where it could be edited)."""
    name, tokens = op["op"], parse_pointer(op["path"])
    if name == "add":
        return add(doc, tokens, copy.deepcopy(op["value"]))
    if name == "remove":
        return remove(doc, tokens)
    if name == "replace":
        get(doc, tokens)  # must exist
        return add(remove(doc, tokens) if tokens else doc, tokens, copy.deepcopy(op["value"]))
    if name == "test":
        if not json_equal(get(doc, tokens), op["value"]):
            raise PatchConflict(f"test failed at {op['path']!r}")
        return doc
    source = parse_pointer(op["from"])
    if name == "move" and tokens[: len(source)] == source and tokens != source:
        raise PatchConflict("cannot move a value into one of its own children")
    value = copy.deepcopy(get(doc, source))
    if name == "move":
        doc = remove(doc, source)
    return add(doc, tokens, value)


def apply_patch(doc: Any, operations: Any) -> Any:
    """Apply a whole JSON Patch to a copy of `doc`; the original is untouched when any operation fails."""
    if not isinstance(operations, list):
        raise PatchInvalid("a JSON Patch is a JSON array of operations")
    doc = copy.deepcopy(doc)
    for i, op in enumerate(operations):
        try:
            doc = apply_operation(doc, validate_operation(op))
        except PatchError as exc:
            exc.op_index = i
            raise
    return doc


def patch_object(document: dict[str, Any], patch: Any, *, kind: str, what: str) -> dict[str, Any]:
    """A JSON object patched by a merge patch (`kind` "merge", RFC 7386) or a JSON Patch ("json", RFC 6902),
    which must leave it an object; errors answer as the sync API does (400 / 409, naming the operation)."""
    try:
        if kind == "merge":
            if not isinstance(patch, dict):
                raise PatchInvalid(f"a merge patch for {what} must be a JSON object")
            patched = merge_patch(document, patch)
        else:
            patched = apply_patch(document, patch)
        if not isinstance(patched, dict):
            raise PatchInvalid(f"{what} must stay a JSON object")
    except PatchError as exc:
        raise as_application_error(exc) from exc
    return patched


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes a member, anything else (arrays too) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
