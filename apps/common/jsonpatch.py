"""RFC 6902 (JSON Patch) and RFC 7386 (JSON Merge Patch) on plain Python JSON values.

Errors come in three kinds, as the sync API answers them: `PatchInvalid` (the operation itself is malformed: 400),
`PatchConflict` (it does not fit the document as it is now: a failed `test`, a missing path, an index out of
range: 409) and `PatchTooLarge` (it would write more than a request body may carry: 413). Each carries the
operation's position in the request.

A patch may write at most LOREKEEPER_MAX_JSON_BYTES of JSON, counting every value an `add`, `replace` or `copy`
puts in (a `move` relocates without writing, `remove` and `test` write nothing): a `copy` of what earlier copies
made would otherwise double the document at each operation, so a request of a kilobyte could store gigabytes.
Each value is measured once, as it is copied, so the cost of a patch is bounded by the limit, not by its result.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from django.conf import settings

from apps.common.exceptions import ApplicationError

OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")
MAX_OPERATIONS = 10_000
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


class PatchTooLarge(PatchError):
    def __init__(self, message: str, *, max_bytes: int, op_index: int | None = None) -> None:
        super().__init__(message, op_index=op_index)
        self.max_bytes = max_bytes


def as_application_error(exc: PatchError) -> ApplicationError:
    """400 `patch_invalid`, 409 `patch_conflict` or 413 `patch_too_large`, naming the operation."""
    where = f"Operation {exc.op_index}: " if exc.op_index is not None else ""
    if isinstance(exc, PatchTooLarge):
        return ApplicationError(
            f"{where}{exc.message}.",
            {"operation": exc.op_index, "max_bytes": exc.max_bytes},
            status=413,
            code="patch_too_large",
        )
    conflict = isinstance(exc, PatchConflict)
    return ApplicationError(
        f"{where}{exc.message}.",
        {"operation": exc.op_index},
        status=409 if conflict else 400,
        code="patch_conflict" if conflict else "patch_invalid",
    )


def json_size(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON."""
    return len(_encode(value).encode("utf-8", "surrogatepass"))


def _encode(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except RecursionError as exc:
        raise PatchInvalid("the value is nested too deeply") from exc


class WriteBudget:
    """What one patch may still write (see the module's docstring): every value it puts in goes through `take`."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = settings.LOREKEEPER_MAX_JSON_BYTES if limit is None else limit
        self.written = 0

    def take(self, value: Any) -> Any:
        """A copy of `value` to write, counted first: refused before anything is copied once over the limit."""
        encoded = _encode(value)
        self.written += len(encoded.encode("utf-8", "surrogatepass"))
        if self.written > self.limit:
            raise PatchTooLarge(f"the patch would write more than {self.limit} bytes", max_bytes=self.limit)
        return json.loads(encoded)  # as copy.deepcopy, at the encoder's speed


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


def apply_operation(doc: Any, op: dict[str, Any], budget: WriteBudget) -> Any:
    """Apply one (validated) operation; answers the new document (the same object where it could be edited)."""
    name, tokens = op["op"], parse_pointer(op["path"])
    if name == "add":
        return add(doc, tokens, budget.take(op["value"]))
    if name == "remove":
        return remove(doc, tokens)
    if name == "replace":
        get(doc, tokens)  # must exist
        return add(remove(doc, tokens) if tokens else doc, tokens, budget.take(op["value"]))
    if name == "test":
        if not json_equal(get(doc, tokens), op["value"]):
            raise PatchConflict(f"test failed at {op['path']!r}")
        return doc
    source = parse_pointer(op["from"])
    if name == "move":
        if tokens[: len(source)] == source and tokens != source:
            raise PatchConflict("cannot move a value into one of its own children")
        value = get(doc, source)  # leaves its place, so it needs no copy
        return add(remove(doc, source), tokens, value)
    return add(doc, tokens, budget.take(get(doc, source)))


def apply_patch(doc: Any, operations: Any, *, budget: WriteBudget | None = None) -> Any:
    """Apply a whole JSON Patch to a copy of `doc`; the original is untouched when any operation fails."""
    if not isinstance(operations, list):
        raise PatchInvalid("a JSON Patch is a JSON array of operations")
    if len(operations) > MAX_OPERATIONS:
        raise PatchInvalid(f"a JSON Patch has at most {MAX_OPERATIONS} operations")
    budget = budget or WriteBudget()
    doc = copy.deepcopy(doc)
    for i, op in enumerate(operations):
        try:
            doc = apply_operation(doc, validate_operation(op), budget)
        except PatchError as exc:
            exc.op_index = i
            raise
    return doc


def patch_object(document: dict[str, Any], patch: Any, *, kind: str, what: str) -> dict[str, Any]:
    """A JSON object patched by a merge patch (`kind` "merge", RFC 7386) or a JSON Patch ("json", RFC 6902),
    which must leave it an object; errors answer as the sync API does (400 / 409 / 413, naming the operation).

    The result may not be larger than LOREKEEPER_MAX_JSON_BYTES (or than the document was, for one stored larger
    by an import): a document grows no further than a request could have sent it whole."""
    budget = WriteBudget()
    try:
        if kind == "merge":
            if not isinstance(patch, dict):
                raise PatchInvalid(f"a merge patch for {what} must be a JSON object")
            patched = merge_patch(document, patch)
        else:
            patched = apply_patch(document, patch, budget=budget)
        if not isinstance(patched, dict):
            raise PatchInvalid(f"{what} must stay a JSON object")
        size = json_size(patched)
        if size > budget.limit and size > json_size(document):
            limit = budget.limit
            raise PatchTooLarge(f"the patched {what} would be larger than {limit} bytes", max_bytes=limit)
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
