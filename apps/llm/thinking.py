"""The think-block stripper: every model answer passes here before any parser sees it.

Reasoning models put their thoughts in the text (`<think>…</think>`, also `<thinking>`, `<reasoning>`,
`<|channel|>analysis…`) or in a field beside it (`reasoning_content` from DeepSeek and vLLM, `reasoning` from
OpenRouter and Ollama's /v1, `thinking` from Ollama's /api/chat). Some chat templates print the opening tag in the
prompt, so the answer holds only the closing one; a truncated answer may hold an opening tag that never closes.
"""

from __future__ import annotations

import re

_TAGS = "think|thinking|reasoning|reflection"
# An opening tag's attributes are read up to ATTRIBUTES characters: a tag's `[^>]*` ran to the answer's end for
# each of many "<think" never closed by ">", the square of the answer's length.
ATTRIBUTES = 200
_BLOCK_OPEN = re.compile(rf"<(?P<tag>{_TAGS})\b[^>]{{0,{ATTRIBUTES}}}>", re.IGNORECASE)
_CLOSE = {tag: re.compile(rf"</{tag}\s*>", re.IGNORECASE) for tag in _TAGS.split("|")}
_ORPHAN_CLOSE = re.compile(rf"^(?P<body>.*?)</(?:{_TAGS})\s*>", re.IGNORECASE | re.DOTALL)
_UNCLOSED_OPEN = re.compile(rf"<(?:{_TAGS})\b[^>]{{0,{ATTRIBUTES}}}>(?P<body>.*)$", re.IGNORECASE | re.DOTALL)

# gpt-oss's harmony format leaking into text: analysis channel first, final answer after.
_HARMONY = re.compile(
    r"(?:<\|start\|>assistant)?<\|channel\|>analysis<\|message\|>(?P<body>.*?)(?:<\|end\|>|$)", re.DOTALL
)
_HARMONY_FINAL = re.compile(r"<\|start\|>assistant<\|channel\|>final<\|message\|>|<\|channel\|>final<\|message\|>")


def _blocks_out(text: str, thoughts: list[str]) -> str:
    """The text without its closed blocks (`<think>…</think>`, a block closed by its own tag), their bodies added
    to `thoughts`. One pass: an opening tag whose tag never closes after it is left, and so is every later one of
    that tag, without searching again (a pattern searched from each to the end: an answer of 20,000 characters of
    unclosed "<think>" took 0.7 s, and the square of that for ten times as many)."""
    kept, at, unclosed = [], 0, set()
    search = at
    while (opened := _BLOCK_OPEN.search(text, search)) is not None:
        tag = opened["tag"].lower()
        closed = None if tag in unclosed else _CLOSE[tag].search(text, opened.end())
        if closed is None:  # an opening tag left as it is: the next may begin within it ("<think<thinking>")
            unclosed.add(tag)
            search = opened.start() + 1
            continue
        kept.append(text[at : opened.start()])
        thoughts.append(text[opened.end() : closed.start()].strip())
        at = search = closed.end()
    kept.append(text[at:])
    return "".join(kept)


def strip_thinking(text: str | None) -> tuple[str, str]:
    """(answer, reasoning) from a raw answer text."""
    if not text:
        return "", ""
    thoughts: list[str] = []

    def keep(match: re.Match) -> str:
        thoughts.append(match.group("body").strip())
        return ""

    text = _HARMONY.sub(keep, text)
    text = _HARMONY_FINAL.sub("", text).replace("<|return|>", "").replace("<|end|>", "")
    text = _blocks_out(text, thoughts)
    text = _ORPHAN_CLOSE.sub(keep, text, count=1)
    text = _UNCLOSED_OPEN.sub(keep, text, count=1)
    return text.strip(), "\n\n".join(t for t in thoughts if t)


REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")


def split_message(message: dict) -> tuple[str, str]:
    """(answer, reasoning) from an answer message dict of either API, merging the reasoning fields with any
    think blocks found in the content."""
    answer, inline = strip_thinking(message.get("content") if isinstance(message.get("content"), str) else "")
    fields = [str(message[name]).strip() for name in REASONING_FIELDS if isinstance(message.get(name), str)]
    reasoning = "\n\n".join(part for part in [*fields, inline] if part)
    return answer, reasoning


_OPEN = re.compile(rf"<(?P<tag>{_TAGS})\b[^>]*>", re.IGNORECASE)
_OPENING = re.compile(rf"<(?:{_TAGS})\b[^>]*$", re.IGNORECASE)  # an opening tag still arriving
_TAG_NAMES = tuple(f"<{name}" for name in _TAGS.split("|"))
_HOLD_LIMIT = 200  # longer than any opening tag: past it the text is no tag
CLOSE_REACH = 64  # characters before a new piece where its closing tag may have begun
REASONING_KEPT = 200_000  # characters of a streamed think block kept in `reasoning` (a model may think on and on)


class ThinkFilter:
    """The think-block stripper for a streamed answer: feed it the text as it arrives and it gives back what may be
    shown. A think block at the start of the answer (leading space aside) is held back and kept in `reasoning`;
    everything after it, and any answer that does not open with one, passes as it comes (leading space removed).
    Only the start is watched: a block later in the text, or a lone closing tag, would need the whole answer held
    back, which streaming is for not doing (`strip_thinking` cleans the recorded answer afterwards)."""

    def __init__(self) -> None:
        self._state = "start"  # start → (inside → after) → pass
        self._held = ""  # start: the text so far (a possible opening tag); after: the spaces after the block
        self._close: re.Pattern | None = None
        # Inside the block: its text in pieces (not one string grown by each piece, which copied all of it each
        # time: the square of a long block's length on the event loop), and its last CLOSE_REACH characters.
        self._thought: list[str] = []
        self._thought_chars = 0
        self._tail = ""
        self.reasoning = ""

    def feed(self, piece: str) -> str:
        if self._state == "pass":
            return piece
        if self._state == "inside":
            return self._inside(piece)
        self._held += piece
        if self._state == "start":
            head = self._held.lstrip()
            opened = _OPEN.match(head)
            if opened:
                self._close = _CLOSE[opened.group("tag").lower()]
                self._state, self._held = "inside", ""
                return self._inside(head[opened.end() :])
            if not head or (len(head) < _HOLD_LIMIT and _may_open(head)):
                return ""
            self._state, self._held = "pass", ""
            return head
        return self._after()

    def _inside(self, piece: str) -> str:
        # Only the new text, and a tag's length before it, can hold the closing tag: not all that is held again.
        window = self._tail + piece
        closed = self._close.search(window)
        if closed is None:
            cut = max(0, len(window) - CLOSE_REACH)
            self._think(window[:cut])
            self._tail = window[cut:]
            return ""
        self._think(window[: closed.start()])
        self._thought_done()
        self._state, self._held = "after", window[closed.end() :]
        return self._after()

    def _think(self, text: str) -> None:
        room = REASONING_KEPT - self._thought_chars
        if text and room > 0:
            self._thought.append(text[:room])
            self._thought_chars += min(len(text), room)

    def _thought_done(self) -> None:
        self.reasoning += "".join(self._thought).strip()
        self._thought, self._thought_chars, self._tail = [], 0, ""

    def _after(self) -> str:
        shown = self._held.lstrip()
        if shown:
            self._state, self._held = "pass", ""
        return shown

    def finish(self) -> str:
        """What is still held when the answer ends: text that only looked like the start of a tag is shown; an
        unclosed block (an answer cut short while thinking) is all reasoning."""
        held, self._held = self._held, ""
        if self._state == "inside":
            self._think(self._tail)
            self._thought_done()
            return ""
        return held.lstrip() if self._state == "start" else ""


def _may_open(head: str) -> bool:
    lowered = head.lower()
    return any(name.startswith(lowered) for name in _TAG_NAMES) or bool(_OPENING.match(head))
