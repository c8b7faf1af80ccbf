"""Which chat a gateway request belongs to (docs/GATEWAY.md, "How chats are matched").

1. Named: the `X-Lorekeeper-Chat` header holds a chat id of the person's (another's is a 404) or a client key
   (the chat holding it, or a new chat given it).
2. Else by the conversation's fingerprint: the first system message and the messages up to and including the
   person's first one (the greeting and the first words), each with whitespace normalised. Those never change as
   the story grows, so every request of a story has the same fingerprint; two stories of the same card part at the
   person's first message. The fingerprint is kept as the chat's client key (`gateway:<system>:<story>`), and a
   branch of the story's (services/sync.py: a conversation that begins alike and would cut it down) as that key,
   `/` and a suffix: of these the one the history agrees with longest is the story.
3. Else the person edited their first message (or the greeting): the fingerprint is new, but a chat with the same
   system prompt holds the same speakers message by message, and at least one reply after the person's first
   message word for word (two stories of one card part at the person's first message, so their replies differ).
   That chat is the story; the new fingerprint becomes its key.
4. Else a front end that sends only the newest messages (the oldest trimmed to fit its context) is found where its
   first two messages stand, in that order, past the start of a chat with the same system prompt; or, one that
   keeps the greeting ahead of them, where the two after the greeting stand in a chat that begins with it
   (services/window.py).
5. Else a new chat, named after the character the system prompt names.
A front end's own task about a chat (services/request.py `front_end_task`: Open WebUI's title, tags, follow-ups) is
answered and not stored, and its prompt is sent as it came: it goes to the chat it names, else to the chat the
person generated in last (a chat the key names is not made for it: Open WebUI asks a new chat's title before its
first reply, and the chat is made by that request, named after its character). A person with no chat yet gets one
for it (TASK_KEY), which their first conversation then is.

An edited first message with nothing after it to recognise the story by (edited, then regenerated at once) starts
a new chat rather than risk merging two stories (the header keeps it in one).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.chats.models import Character, Chat, Message
from apps.chats.selectors import chat_get
from apps.chats.services.characters import character_create
from apps.chats.services.chats import chat_create, chat_update, client_key_lock
from apps.chats.services.start import chat_file_title
from apps.common.exceptions import ApplicationError
from apps.gateway.services.placing import agreement, kept_at, likeliest
from apps.gateway.services.request import Line, front_end_task, said
from apps.gateway.services.window import HEAD_KEPT, kept_window, window_places
from apps.generation.models import Generation

KEY_PREFIX = "gateway"
TASK_KEY = f"{KEY_PREFIX}:task"  # the chat made for a front end's task before the person had any: their next new chat
BRANCH = "/"  # a branch's key: its story's, this, and a suffix of its own
MAX_KEY = 500
WINDOW_CHATS = 20  # the chats of the same system prompt searched, the most recently written first
OPENING_CHECK = 50  # messages from a story's start compared to recognise it after its opening was edited
DISTINCT_REPLY = 20  # characters of a reply, at least, for it to recognise a story
CAPITALISED = r"([A-Z][\w'’-]*(?: [A-Z][\w'’-]*){0,3})"
NAMED = [
    re.compile(r"\bWrite (.{1,60}?)'s next reply"),
    re.compile(r"\b(?:[Yy]ou are|[Rr]oleplay as|[Pp]lay the role of|[Pp]lay as)\s+" + CAPITALISED),
    # A line's own spaces only (`[^\S\n]`, not `\s`): from each line's start `\s*` ran on through every blank line
    # after it, and a prompt of 100,000 newlines took minutes.
    re.compile(r"^[^\S\n]*\[?(?:Character|Name|char)\s*[:=]\s*([^\n\]]{1,60})", re.MULTILINE),
]


@dataclass
class Found:
    chat: Chat
    start: int  # the index of the chat's message the request's history starts at
    how: str  # header | fingerprint | edited | window | new | task
    # Found by a guess (fingerprint, edited opening, window): the key of the branch the request goes on in if it
    # would rewrite the chat before its last exchange (services/sync.py)
    branch_key: str = ""
    # The first `head` messages of the request's history are the chat's first (a greeting a front end keeps ahead of
    # its cut); the rest starts at `start`
    head: int = 0


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()


def _system(lines: list[Line]) -> str:
    return next((line.said for line in lines if line.role == "system"), "")


def _history(lines: list[Line]) -> list[Line]:
    return [line for line in lines if line.role != "system"]


def fingerprint(lines: list[Line]) -> str:
    """The chat's client key for this conversation: its system prompt and its opening up to the person's first
    message."""
    history = _history(lines)
    first_user = next((n for n, line in enumerate(history) if line.role == "user"), len(history) - 1)
    opening = [[line.role, line.said] for line in history[: first_user + 1]]
    return f"{KEY_PREFIX}:{_digest(_system(lines))[:16]}:{_digest(opening)[:32]}"


def character_named(lines: list[Line]) -> str:
    """The character the conversation is with: the name a reply carries, else one the system prompt gives."""
    for line in lines:
        if line.role == "assistant" and line.name:
            return line.name
    system = next((line.content for line in lines if line.role == "system"), "")
    for pattern in NAMED:
        found = pattern.search(system)
        if found:
            return found.group(1).strip()[:200]
    return ""


# SillyTavern's main prompt names both: "Write Mira's next reply in a fictional chat between Mira and Rowan." (its
# {{char}} and {{user}}). Each name's length is bounded: the search stays linear over a long prompt.
BETWEEN = re.compile(r"\bchat between ([^\n]{1,60}?) and ([^\n.]{1,60})")


def person_named(lines: list[Line]) -> str:
    """Who the person plays: the name their messages carry, else the one SillyTavern's main prompt gives (so that
    the chat's lines, and a `{{user}}` in its lore, say the name the front end shows, not the account's)."""
    named = next((line.name for line in lines if line.role == "user" and line.name), "")
    if named:
        return named
    found = BETWEEN.search(next((line.content for line in lines if line.role == "system"), ""))
    return found.group(2).strip() if found else ""


def _new_chat(user: AbstractUser, lines: list[Line], client_key: str) -> Chat:
    """A new chat for the conversation, named after the character its system prompt names; or the chat made for a
    front end's task before the person had any (TASK_KEY, no messages), which is the one that task was about."""
    name = character_named(lines)
    characters: list[Character] = []
    if name:
        character = Character.objects.filter(user=user, name__iexact=name).order_by("id").first()
        characters = [character or character_create(user=user, name=name)]
    person = person_named(lines)
    title = chat_file_title([name or "Assistant"], timezone.now())
    if client_key != TASK_KEY:  # a task making the chat it waits in meanwhile: this one then takes it
        client_key_lock(user=user, client_key=TASK_KEY)
    waiting = Chat.objects.filter(user=user, client_key=TASK_KEY, message_count=0).first()
    if waiting is not None and client_key != TASK_KEY:
        data = {"title": title, "character_ids": [c.pk for c in characters], "character_name": name or "Assistant",
                "user_name": person or user.get_username(), "client_key": client_key}  # fmt: skip
        return chat_update(chat=waiting, data=data)
    return chat_create(
        user=user,
        title=title,
        character_ids=[c.pk for c in characters],
        user_name=person,
        character_name=name or "Assistant",
        client_key=client_key,
    )


def _window_at(chat: Chat, lines: list[Line]) -> int:
    places = window_places([(chat.pk, chat.message_count)], _history(lines))
    return likeliest([(chat, index) for _, index in places], lines)[1] if places else 0


@transaction.atomic
def chat_for_request(*, user: AbstractUser, lines: list[Line], header: str = "") -> Found:
    """The chat the request belongs to, made when there is none (see the module's docstring)."""
    header = header.strip()
    task = front_end_task(lines)  # answered, not stored (services/sync.py): never a chat of its own
    if header:
        if len(header) > MAX_KEY:
            raise ApplicationError(
                f"X-Lorekeeper-Chat holds at most {MAX_KEY} characters.", {"field": "X-Lorekeeper-Chat"}
            )
        if header.isascii() and header.isdigit():  # "²" is a digit to isdigit, not to int(): a client key
            # Another user's: 404. Its characters are not read: the history's sync locks the chat and reads it again.
            chat = chat_get(user=user, chat_id=int(header), characters=False)
        else:
            client_key_lock(user=user, client_key=header)
            chat = Chat.objects.filter(user=user, client_key=header).first()
            if chat is None and not task:
                return Found(_new_chat(user, lines, header), 0, "new")
        if chat is not None:
            return Found(chat, _window_at(chat, lines) if not task and _moved(chat, lines) else 0, "header")
    if task:  # the chat the person generated in last (nothing is written to it), else the one written last
        client_key_lock(user=user, client_key=TASK_KEY)  # (two tasks of a person with no chat yet make one)
        latest = Generation.objects.filter(user=user).order_by("-pk").values_list("chat_id", flat=True).first()
        chat = Chat.objects.filter(user=user, pk=latest).first() if latest is not None else None
        chat = chat or Chat.objects.filter(user=user).order_by("-updated_at", "-pk").first()
        return Found(chat or _new_chat(user, lines, TASK_KEY), 0, "task")
    key = fingerprint(lines)
    client_key_lock(user=user, client_key=key)
    # The story, or the branch of it (services/sync.py) the history agrees with longest, the most recent first
    stories = list(
        Chat.objects.filter(Q(client_key=key) | Q(client_key__startswith=key + BRANCH), user=user).order_by(
            "-updated_at", "-pk"
        )[:WINDOW_CHATS]
    )
    if stories:
        chat, start, head = _story(stories, lines)
        return Found(chat, start, "fingerprint", _branch_key(key), head=head)
    system_key = key.rsplit(":", 1)[0] + ":"
    same_system = (
        Chat.objects.filter(user=user, client_key__startswith=system_key)
        .order_by("-updated_at")
        .values_list("pk", "message_count")[:WINDOW_CHATS]
    )
    same_system = list(same_system)
    edited = _edited_opening([pk for pk, _ in same_system], _history(lines))
    if edited is not None:
        Chat.objects.filter(pk=edited).update(client_key=key)  # its opening as it now reads
        return Found(Chat.objects.get(pk=edited), 0, "edited", _branch_key(key))
    # A story and its branches hold the same messages up to where they part, and an exchange may be said twice in
    # one: the chat and place the history agrees with longest from there
    head, places = 0, window_places(same_system, _history(lines))
    if not places:
        head, places = kept_window(same_system, _history(lines))
    if places:
        chats = Chat.objects.in_bulk([chat_id for chat_id, _ in places])
        chat, start = likeliest([(chats[chat_id], index) for chat_id, index in places], _history(lines)[head:])
        return Found(chat, start, "window", _branch_key(chat.client_key.split(BRANCH)[0]), head=head)
    return Found(_new_chat(user, lines, key), 0, "new")


def _story(stories: list[Chat], lines: list[Line]) -> tuple[Chat, int, int]:
    """Of a story and its branches (the most recently written first), the one the history is, where it is compared
    from, and the head it keeps (Found): the history agreeing with them all only as far as a front end's kept
    opening (the greeting and the first words), the one whose messages then stand where the rest agrees longest; a
    story with no branch, the story (history_sync looks for its kept head itself)."""
    if len(stories) == 1:
        return stories[0], 0, 0
    history = _history(lines)
    agrees = [agreement(chat=story, lines=history) for story in stories]
    head = max(agrees)
    if not 0 < head <= HEAD_KEPT or head >= len(history) - 1:
        return likeliest([(story, 0) for story in stories], lines)[0], 0, 0
    rest = history[head:]
    places = [(story, kept_at(story, rest, after=head)) for story in stories]
    places = [(story, at) for story, at in places if at is not None]
    if not places:
        return likeliest([(story, 0) for story in stories], lines)[0], 0, 0
    chat, start = likeliest(places, rest)
    return chat, start, head


def _branch_key(key: str) -> str:
    return f"{key}{BRANCH}{uuid.uuid4().hex[:12]}"


def _edited_opening(chats: list[int], history: list[Line]) -> int | None:
    """The chat (of `chats`, the most recently written first) that is this story with its opening edited: over the
    first OPENING_CHECK messages, the same speakers in the same order, and after the person's first message at least
    one reply (of DISTINCT_REPLY characters or more) the same word for word."""
    first_user = next((n for n, line in enumerate(history) if line.role == "user"), None)
    if first_user is None:
        return None
    head = history[:OPENING_CHECK]
    digests = [hashlib.md5(line.content.encode()).hexdigest() for line in head]
    # The replies that can tell a story apart: a person's short "ok" or a reply of "..." may stand in two stories.
    replies = {n for n, line in enumerate(head) if line.role == "assistant" and len(line.said) >= DISTINCT_REPLY}
    for chat_id in chats:
        rows = list(
            Message.objects.filter(chat_id=chat_id, is_system=False)
            .order_by("index")
            .values_list("is_user", "mes_md5")[: len(head)]
        )
        shared = min(len(rows), len(head))
        if shared <= first_user + 1 or any(rows[n][0] != (head[n].role == "user") for n in range(shared)):
            continue
        if any(rows[n][1] == digests[n] for n in range(first_user + 1, shared) if n in replies):
            return chat_id
    return None


def _moved(chat: Chat, lines: list[Line]) -> bool:
    """Whether the request's history does not start where the chat does (its oldest messages trimmed away)."""
    history = _history(lines)
    first = Message.objects.filter(chat=chat, is_system=False).order_by("index").values_list("is_user", "mes").first()
    if not history or first is None:
        return False
    return not (first[0] == (history[0].role == "user") and said(first[1]) == history[0].said)
