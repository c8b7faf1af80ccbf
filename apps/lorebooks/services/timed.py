"""Sticky, cooldown and delay, as SillyTavern 1.19.0 keeps them (`WorldInfoTimedEffects`).

Sticky and cooldown live in the chat's metadata, `timedWorldInfo: {"sticky": {key: effect}, "cooldown": {...}}`,
an effect being `{"hash", "start", "end", "protected"}` counted in the chat's messages (those the model sees). An
entry activated with `sticky: N` stays active until the chat is N messages longer; with `cooldown: N` it cannot
activate for N messages after (after its stickiness ends, if it has both). `delay: N` keeps an entry out until the
chat has N messages. A dry run (a preview) reads the effects and changes none.
"""

from __future__ import annotations

from typing import Any

TYPES = ("sticky", "cooldown")


def _key(entry: dict[str, Any]) -> str:
    return f"{entry['world']}.{entry['uid']}"


class TimedEffects:
    def __init__(self, state: dict[str, Any], entries: list[dict[str, Any]], length: int, *, dry_run: bool):
        self.state = state
        self.entries = entries
        self.length = length
        self.dry_run = dry_run
        self.active: dict[str, set[str]] = {"sticky": set(), "cooldown": set(), "delay": set()}
        for kind in TYPES:
            if not isinstance(state.get(kind), dict):
                state[kind] = {}
            for key, value in list(state[kind].items()):
                if not isinstance(value, dict):
                    del state[kind][key]

    def _effect(self, kind: str, entry: dict[str, Any], protected: bool) -> dict[str, Any]:
        return {"hash": entry["hash"], "start": self.length, "end": self.length + _int(entry[kind]),
                "protected": protected}  # fmt: skip

    def check(self) -> None:
        if not self.dry_run:
            self._check_kind("sticky")
            self._check_kind("cooldown")
        for entry in self.entries:
            if entry.get("delay") and self.length < entry["delay"]:
                self.active["delay"].add(entry["hash"])

    def _check_kind(self, kind: str) -> None:
        by_hash = {str(entry["hash"]): entry for entry in self.entries}
        for key, value in list(self.state[kind].items()):
            entry = by_hash.get(str(value.get("hash")))
            if self.length <= _int(value.get("start")) and not value.get("protected"):
                del self.state[kind][key]  # the chat did not advance: a redo of the same turn
                continue
            if entry is None:
                if self.length >= _int(value.get("end")):
                    del self.state[kind][key]
                continue
            if not entry.get(kind):
                del self.state[kind][key]
                continue
            if self.length >= _int(value.get("end")):
                del self.state[kind][key]
                if kind == "sticky" and entry.get("cooldown"):  # its cooldown starts as its stickiness ends
                    self.state["cooldown"][_key(entry)] = self._effect("cooldown", entry, True)
                    self.active["cooldown"].add(entry["hash"])
                continue
            self.active[kind].add(entry["hash"])

    def is_active(self, kind: str, entry: dict[str, Any]) -> bool:
        return entry["hash"] in self.active[kind]

    def set(self, activated: list[dict[str, Any]]) -> None:
        if self.dry_run:
            return
        for entry in activated:
            for kind in TYPES:
                if entry.get(kind) and _key(entry) not in self.state[kind]:
                    self.state[kind][_key(entry)] = self._effect(kind, entry, False)


def _int(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
