"""Daily memories as entity-core writes them (docs/GLOSSARY.md): bullets, each tagged with the chat it came from
(`[chat:id]`) and the instance that wrote it (`[via:instance]`). A daily memory belongs to one instance
(`YYYY-MM-DD_instance`); a second create for the same day merges into it, a bullet whose chat is already there being
left out (so imports of the same day from different places, at different times, add up instead of repeating)."""

from __future__ import annotations

import re

BULLET_MARKS = "-*•"
_CHAT_TAG = re.compile(r"\[chat:([^\]\s]+)\]")
_VIA_TAG = re.compile(r"\[via:([^\]\s]+)\]")


def bullets(content: str) -> list[str]:
    """The bullet texts of a daily memory; a text without bullets is one bullet per non-empty line."""
    found = []
    for line in content.splitlines():
        if not line.strip():
            continue
        text = line.strip()
        # "- text": the mark, a space, then the text. Read without a regular expression: one of a mark, spaces
        # and no text backtracked through the spaces once for each, and a line of 100,000 took minutes.
        bullet = len(text) > 2 and text[0] in BULLET_MARKS and text[1].isspace()
        found.append(text[1:].lstrip() if bullet else text)
    return found


def chat_tag(bullet: str) -> str | None:
    match = _CHAT_TAG.search(bullet)
    return match.group(1) if match else None


def tagged(bullet: str, instance: str) -> str:
    """The bullet with its `[via:instance]` tag (kept if it has one)."""
    return bullet if _VIA_TAG.search(bullet) else f"{bullet} [via:{instance}]"


def render(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def daily_tag(content: str, instance: str) -> str:
    """A daily memory's content as stored: bullets, each with its instance tag."""
    return render([tagged(item, instance) for item in bullets(content)])


def daily_merge(existing: str, incoming: str, instance: str) -> str:
    """`existing` with the bullets of `incoming` it does not have: a bullet tagged with a chat already present is
    left out (deduplicated by `[chat:id]`), an untagged one when the same text is there."""
    kept = bullets(existing)
    chats = {tag for tag in map(chat_tag, kept) if tag}
    texts = {_VIA_TAG.sub("", item).strip() for item in kept}
    for item in bullets(incoming):
        tag = chat_tag(item)
        if tag is not None and tag in chats:
            continue
        if tag is None and _VIA_TAG.sub("", item).strip() in texts:
            continue
        kept.append(tagged(item, instance))
        texts.add(_VIA_TAG.sub("", item).strip())
    return render(kept)
