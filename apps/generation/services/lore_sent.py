"""Which of the World Info entries a chat activated another client's own prompt already holds (a front end through
the gateway, with World Info of its own), so that they are not given twice."""

from __future__ import annotations

import dataclasses
from typing import Any

from apps.lorebooks.services.scan import Activation


def _spaced(text: str) -> str:
    """The words of `text`, each run of whitespace between them one space."""
    return " ".join(text.split())


def lore_unsent(lore: Activation, sent: list[dict[str, str]]) -> tuple[Activation, set[tuple[str, Any]]]:
    """The activation without the entries another client's prompt already holds word for word, and those entries
    (book, uid): a front end with World Info of its own (SillyTavern through the gateway) has put in the entries it
    activated, and the same book imported here would otherwise give them twice. An entry is also held where the
    front end's system messages say it spaced otherwise (a blank line collapsed, the ends trimmed: its own copy
    of the book, or its prompt's formatting); its history, a megabyte on a long chat, is searched word for word
    only."""
    text = "\n".join(str(line.get("content", "")) for line in sent)
    system: list[str] = []  # the system messages, spaced as `_spaced` spaces: made when first needed

    def holds(content: str) -> bool:
        if content in text:
            return True
        if not system:
            system.append(
                _spaced("\n".join(str(line.get("content", "")) for line in sent if line.get("role") == "system"))
            )
        spaced = _spaced(content)
        return bool(spaced) and spaced in system[0]

    held = {
        (entry["world"], entry["uid"]) for entry in lore.entries if entry.get("content") and holds(entry["content"])
    }

    def new(contents: list[str]) -> list[str]:
        return [content for content in contents if content.strip() and not holds(content)]

    depth = [group | {"entries": new(group["entries"])} for group in lore.depth]
    unsent = dataclasses.replace(
        lore, before=new(lore.before), after=new(lore.after), an_top=new(lore.an_top), an_bottom=new(lore.an_bottom),
        examples=[(where, content) for where, content in lore.examples if new([content])],
        depth=[group for group in depth if group["entries"]],
    )  # fmt: skip
    return unsent, held
