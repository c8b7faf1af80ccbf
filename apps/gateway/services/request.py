"""A chat completion request as OpenAI's API shapes one, checked: its messages and the options asked of the model.
Bad input is refused with a 400 naming the field (`messages[3].role`, `temperature`)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any, NamedTuple

from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import text_storable, text_stored
from apps.generation.services.bounds import MAX_MESSAGE
from apps.llm.models import Connection
from apps.llm.sampler import REPLY_TOKENS_MAX, SAMPLER_KEYS, sampler_clean

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
MAX_MESSAGES = 20_000
# A system prompt is sent to the model, never stored as a message: a front end's, with its lorebook entries in it,
# may pass a message's limit (MAX_MESSAGE). The body's own limit (10 MB) bounds it too.
MAX_SYSTEM = 1_000_000


class Line(NamedTuple):
    """One message of the request: `role` is system, user or assistant (`developer` is read as system). A tuple, as
    a whole history arrives with each turn: made in about half the time of a frozen dataclass."""

    role: str
    content: str
    name: str = ""

    @property
    def said(self) -> str:
        """What it says, as two messages are compared: whitespace at its ends and runs of it do not count."""
        return said(self.content)


def said(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text or "").split())


WORD = re.compile(r"\w+")


def words(text: str) -> frozenset[str]:
    """A text's words, whatever their case and the punctuation around them."""
    return frozenset(WORD.findall(unicodedata.normalize("NFC", text or "").casefold()))


def words_shared(one: str, other: str) -> float:
    """How much of their words two texts share, 0 to 1 (the words both say, of the words either says): an edit
    keeps many of a message's words."""
    a, b = words(one), words(other)
    return len(a & b) / len(a | b) if a or b else 1.0


TASK_START = "### Task:"
TASK_HISTORY = "<chat_history>"


def front_end_task(lines: list[Line]) -> bool:
    """Whether the request is a front end's own task about a chat rather than a turn of it: Open WebUI asks the
    chat's model for its title, tags, follow-up suggestions, search queries and an image's prompt, each as a
    conversation of one message of the person's, made from its templates: `### Task:`, then the chat's newest
    messages between `<chat_history>` tags. (Its answer with a file's or a search's context starts `### Task:` too,
    as the person's own turn, and holds no chat history.)"""
    history = [line for line in lines if line.role != "system"]
    if len(history) != 1 or history[0].role != "user":
        return False
    text = history[0].content
    return text.lstrip().startswith(TASK_START) and TASK_HISTORY in text


def _content(value: Any, field: str, limit: int = MAX_MESSAGE) -> str:
    """A message's text: a string, or the text parts of a list of parts (images and the like are not kept)."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    elif isinstance(value, list):
        parts = []
        for n, part in enumerate(value):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise ApplicationError(
                    f"{field}[{n}] is a content part: an object with a `type`.", {"field": f"{field}[{n}]"}
                )
            if part["type"] == "text":
                if not isinstance(part.get("text"), str):
                    raise ApplicationError(f"{field}[{n}].text is a string.", {"field": f"{field}[{n}].text"})
                parts.append(part["text"])
        text = "\n".join(parts)
    else:
        raise ApplicationError(f"{field} is a string or a list of content parts.", {"field": field})
    if len(text) > limit:
        raise ApplicationError(f"{field} holds at most {limit} characters.", {"field": field})
    return text_stored(text)


def messages_parse(messages: Any) -> list[Line]:
    if not isinstance(messages, list) or not messages:
        raise ApplicationError("`messages` is a non-empty list of messages.", {"field": "messages"})
    if len(messages) > MAX_MESSAGES:
        raise ApplicationError(f"`messages` holds at most {MAX_MESSAGES} messages.", {"field": "messages"})
    # A whole history arrives with each turn: a plain message (a known role, a text within bounds, no name) is
    # taken in the loop itself, as a tuple made directly; any other is checked by `_line`, which names what is wrong.
    lines: list[Line] = []
    append, roles, make = lines.append, ROLES, tuple.__new__
    for n, message in enumerate(messages):
        if type(message) is dict and message.get("name") is None:
            asked, content = message.get("role"), message.get("content")
            role = roles.get(asked) if type(asked) is str else None
            if role is not None and type(content) is str and len(content) <= MAX_MESSAGE and text_storable(content):
                append(make(Line, (role, content, "")))
                continue
        append(_line(n, message))
    return lines


def _line(n: int, message: Any) -> Line:
    if not isinstance(message, dict):
        field = f"messages[{n}]"
        raise ApplicationError(f"{field} is an object with a role and a content.", {"field": field})
    asked = message.get("role")
    role = ROLES.get(asked) if isinstance(asked, str) else None
    if role is None:
        raise ApplicationError(
            f"messages[{n}].role is one of {', '.join(ROLES)}, not {asked!r}.", {"field": f"messages[{n}].role"}
        )
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise ApplicationError(f"messages[{n}].name is a string.", {"field": f"messages[{n}].name"})
    content = message.get("content")
    limit = MAX_SYSTEM if role == "system" else MAX_MESSAGE
    if type(content) is not str or len(content) > limit or not text_storable(content):
        content = _content(content, f"messages[{n}].content", limit)
    return Line(role, content, text_stored(name).strip()[:200] if name else "")


def _sampler(body: dict[str, Any]) -> dict[str, Any]:
    asked = {key: body[key] for key in SAMPLER_KEYS if body.get(key) is not None}
    if isinstance(asked.get("stop"), str):
        asked["stop"] = [asked["stop"]]
    return sampler_clean(asked)  # names the field of a value out of range


def options_parse(body: dict[str, Any], connection: Connection) -> dict[str, Any]:
    """What is asked of the model: the request's samplers over the connection's own, and its reply length
    (`max_completion_tokens`, else `max_tokens`) over the connection's."""
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):  # True == 1 to Python
        raise ApplicationError("`n` is 1: one reply is written at a time.", {"field": "n"})
    options: dict[str, Any] = {"sampler": sampler_clean({**(connection.sampler or {}), **_sampler(body)})}
    for field in ("max_completion_tokens", "max_tokens"):
        value = body.get(field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= REPLY_TOKENS_MAX:
            raise ApplicationError(f"`{field}` is a whole number from 1 to {REPLY_TOKENS_MAX}.", {"field": field})
        options["max_tokens"] = value
        break
    return options
