"""The fields of a World Info entry, as SillyTavern 1.19.0 writes them in `worlds/*.json`, and the check every entry
passes before anything of its book is stored (docs/LOREBOOKS.md, "Import").

An entry is kept as SillyTavern's own JSON object (`LorebookEntry.data`): the fields below are checked and given
their defaults, every other key is kept as it came, so an export writes back what was imported.
"""

from __future__ import annotations

from typing import Any

from apps.common.exceptions import ApplicationError
from apps.common.ids import id_from
from apps.common.jsonsafe import json_problem, loads_strict, unstorable_reason
from apps.lorebooks.services.keys import KeyError_, key_compile

POSITION_LABELS = {
    0: "Before the character",
    1: "After the character",
    2: "Top of the author's note",
    3: "Bottom of the author's note",
    4: "At a depth in the chat",
    5: "Before the example messages",
    6: "After the example messages",
    7: "Outlet (a {{outlet::name}} macro)",
}
POSITIONS = POSITION_LABELS
LOGICS = {0: "AND ANY", 1: "NOT ALL", 2: "NOT ANY", 3: "AND ALL"}
ROLES = {0: "system", 1: "user", 2: "assistant"}
TRIGGERS = ("normal", "continue", "impersonate", "swipe", "regenerate", "quiet")
DEFAULT_DEPTH = 4
DEFAULT_WEIGHT = 100
DEFAULT_ORDER = 100
MAX_SCAN_DEPTH = 1000
MAX_ENTRIES = 10_000  # a book with more is refused whole
MAX_KEYS = 200  # per list (primary, secondary)
MAX_KEY_LENGTH = 2_000
MAX_CONTENT = 200_000  # characters of one entry's content
MAX_FILE_BYTES = 20 * 1024 * 1024  # an uploaded World Info file

# name: (type, default). Types: str, int (a number, kept as given), bool, list (of strings), "int?" / "bool?" (null
# means "the book's setting"), enum sets given below.
FIELDS: dict[str, tuple[str, Any]] = {
    "key": ("list", []),
    "keysecondary": ("list", []),
    "comment": ("str", ""),
    "content": ("str", ""),
    "constant": ("bool", False),
    "vectorized": ("bool", False),
    "selective": ("bool", True),
    "selectiveLogic": ("logic", 0),
    "addMemo": ("bool", False),
    "order": ("num", 100),
    "position": ("position", 0),
    "disable": ("bool", False),
    "ignoreBudget": ("bool", False),
    "excludeRecursion": ("bool", False),
    "preventRecursion": ("bool", False),
    "matchPersonaDescription": ("bool", False),
    "matchCharacterDescription": ("bool", False),
    "matchCharacterPersonality": ("bool", False),
    "matchCharacterDepthPrompt": ("bool", False),
    "matchScenario": ("bool", False),
    "matchCreatorNotes": ("bool", False),
    "delayUntilRecursion": ("recursion_delay", 0),
    "probability": ("num", 100),
    "useProbability": ("bool", True),
    "depth": ("num", DEFAULT_DEPTH),
    "outletName": ("str", ""),
    "group": ("str", ""),
    "groupOverride": ("bool", False),
    "groupWeight": ("num", DEFAULT_WEIGHT),
    "scanDepth": ("num?", None),
    "caseSensitive": ("bool?", None),
    "matchWholeWords": ("bool?", None),
    "useGroupScoring": ("bool?", None),
    "automationId": ("str", ""),
    "role": ("role", 0),
    "sticky": ("num?", None),
    "cooldown": ("num?", None),
    "delay": ("num?", None),
    "triggers": ("triggers", []),
}


def order_of(entry: dict[str, Any]) -> float:
    """An entry's insertion order. Without one SillyTavern compares NaN, which its sort takes as "equal" to any
    other; Lorekeeper sorts such an entry as the default order, 100."""
    order = entry.get("order")
    return DEFAULT_ORDER if order is None else order


def _refuse(where: str, field: str, message: str) -> ApplicationError:
    return ApplicationError(f"{where}, field {field}: {message}", {"entry": where, "field": field})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # NaN is not a number


def _check(kind: str, value: Any, where: str, field: str) -> Any:
    """The value in the field's type, or a refusal naming the entry and the field."""
    if kind == "str":
        if not isinstance(value, str):
            raise _refuse(where, field, "must be a string.")
        if field == "content" and len(value) > MAX_CONTENT:
            raise _refuse(where, field, f"is longer than {MAX_CONTENT:,} characters.")
        return value
    if kind in ("bool", "bool?"):
        if value is None and kind == "bool?":
            return None
        if not isinstance(value, bool):
            raise _refuse(where, field, "must be true or false" + (" or null." if kind == "bool?" else "."))
        return value
    if kind in ("num", "num?"):
        if value is None:  # null reads as SillyTavern reads it (`?? default` where it has one)
            return None
        if isinstance(value, str) and value.strip():  # SillyTavern's inputs sometimes save numbers as strings
            try:
                value = float(value) if "." in value else int(value)
            except ValueError:
                pass
        if not _number(value) or abs(value) > 1e9:
            raise _refuse(where, field, "must be a number" + (" or null." if kind == "num?" else "."))
        if field in ("scanDepth", "depth") and not 0 <= value <= MAX_SCAN_DEPTH:
            raise _refuse(where, field, f"must be between 0 and {MAX_SCAN_DEPTH}.")
        if field in ("sticky", "cooldown", "delay", "probability", "groupWeight") and value < 0:
            raise _refuse(where, field, "must not be negative.")
        return value
    if kind == "list":
        if not isinstance(value, list) or not all(isinstance(key, str) for key in value):
            raise _refuse(where, field, "must be a list of strings.")
        if len(value) > MAX_KEYS:
            raise _refuse(where, field, f"has more than {MAX_KEYS} keys.")
        for key in value:
            if len(key) > MAX_KEY_LENGTH:
                raise _refuse(where, field, f"has a key longer than {MAX_KEY_LENGTH:,} characters.")
            try:
                key_compile(key)
            except KeyError_ as error:
                raise _refuse(where, field, f"the regular expression {key!r} does not compile: {error}.") from None
        return value
    if kind in ("position", "logic", "role"):
        if value is None:
            return None
        allowed = {"position": POSITIONS, "logic": LOGICS, "role": ROLES}[kind]
        if not _number(value) or value not in allowed:
            names = ", ".join(f"{number} ({label})" for number, label in allowed.items())
            raise _refuse(where, field, f"{value!r} is not one of {names}.")
        return int(value)
    if kind == "recursion_delay":  # false/0: off; true: level 1; a number: that level
        if isinstance(value, bool):
            return value
        if not _number(value) or value < 0:
            raise _refuse(where, field, "must be true, false or a level (a number of 0 or more).")
        return value
    if kind == "triggers":
        if not isinstance(value, list) or any(trigger not in TRIGGERS for trigger in value):
            raise _refuse(where, field, f"must be a list of {', '.join(TRIGGERS)}.")
        return value
    raise AssertionError(kind)


def entry_clean(raw: Any, *, where: str, fill: bool = False) -> dict[str, Any]:
    """One entry, its fields checked; unknown keys are kept. A field the entry lacks stays absent, and activation
    reads it as SillyTavern does, as JavaScript's `undefined` (no `selective`: the secondary keys are not
    consulted; no `position`: placed nowhere). With `fill`, lacking fields take SillyTavern's defaults, as its
    editor gives them when it opens a book (the entry form does the same). `where` names the entry in an error
    ("entry 12")."""
    if not isinstance(raw, dict):
        raise ApplicationError(f"{where}: must be an object.", {"entry": where})
    entry = dict(raw)
    for field, (kind, default) in FIELDS.items():
        if field in entry:
            entry[field] = _check(kind, entry[field], where, field)
        elif fill:
            entry[field] = _check(kind, default, where, field)
    for field, value in entry.items():
        reason = unstorable_reason({field: value})
        if reason:
            raise _refuse(where, str(field).encode("utf-8", "replace").decode().replace("\x00", ""), f"{reason}.")
    character_filter = entry.get("characterFilter")
    if character_filter is not None and not (
        isinstance(character_filter, dict)
        and all(isinstance(character_filter.get(name, []), list) for name in ("names", "tags"))
    ):
        raise _refuse(where, "characterFilter", "must be an object with lists `names` and `tags`.")
    return entry


def entries_clean(raw: Any, *, label: str = "entry", fill: bool = False) -> list[dict[str, Any]]:
    """A book's `entries`: SillyTavern's object keyed by uid (or a list), each entry checked. Answers them with
    an integer `uid` each, in the order SillyTavern iterates them (by uid). The whole book is refused at the
    first bad entry."""
    if isinstance(raw, dict):
        items = list(raw.items())
    elif isinstance(raw, list):
        items = [(str(n), entry) for n, entry in enumerate(raw)]
    else:
        raise ApplicationError("`entries` must be an object of entries keyed by uid.", {"field": "entries"})
    if len(items) > MAX_ENTRIES:
        raise ApplicationError(
            f"The book has {len(items):,} entries; at most {MAX_ENTRIES:,} are accepted.", {"field": "entries"}
        )
    cleaned: list[dict[str, Any]] = []
    seen: set[int] = set()
    for name, raw_entry in items:
        where = f"{label} {name}"
        entry = entry_clean(raw_entry, where=where, fill=fill)
        uid = entry.get("uid", name)
        if isinstance(uid, str) and (number := id_from(uid.strip())) is not None:
            uid = number  # a uid written as text; any other text (a sign, past 18 digits) is refused below
        if not isinstance(uid, int) or isinstance(uid, bool) or not 0 <= uid < 2**31:
            raise _refuse(where, "uid", "must be a whole number from 0.")
        if uid in seen:
            raise _refuse(where, "uid", f"{uid} is used by another entry.")
        seen.add(uid)
        entry["uid"] = uid
        cleaned.append(entry)
    return sorted(cleaned, key=lambda entry: entry["uid"])


def world_file_read(upload) -> Any:
    """An uploaded World Info file's JSON (the book list's import, and the API's multipart one); a file too large,
    not UTF-8 or not JSON a book can hold (NaN, a number past a float's range, nested past what the parser follows)
    is refused naming `file`."""
    if upload.size > MAX_FILE_BYTES:
        raise ApplicationError(
            f"The file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB.", {"field": "file"}, status=413
        )
    try:
        return loads_strict(upload.read().decode("utf-8"))
    except RecursionError:
        raise ApplicationError("The file is not JSON a book can hold: nested too deeply.", {"field": "file"}) from None
    except ValueError as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ApplicationError(f"The file is not JSON: {json_problem(error)}.", {"field": "file"}) from None
