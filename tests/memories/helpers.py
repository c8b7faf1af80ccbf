from __future__ import annotations

import io
import json
import math
import re

from django.db import connection

from apps.chats.models import Chat
from apps.memories.models import Memory

USER_NAME = "You"


def jsonl_bytes(*messages, character_name: str = "Mira") -> bytes:
    """A SillyTavern chat file: a header, then one message per `(name, mes)` (or a full message dict)."""
    lines = [
        {"user_name": USER_NAME, "character_name": character_name, "create_date": "2026-01-01", "chat_metadata": {}}
    ]
    for i, message in enumerate(messages):
        if isinstance(message, dict):
            lines.append(message)
            continue
        name, mes = message
        lines.append(
            {
                "name": name,
                "is_user": name == USER_NAME,
                "is_system": False,
                "send_date": f"2026-01-01T00:{i:02d}:00.000Z",
                "mes": mes,
                "extra": {},
            }
        )
    return "\n".join(json.dumps(line, ensure_ascii=False) for line in lines).encode()


def jsonl(*messages, character_name: str = "Mira") -> io.BytesIO:
    return io.BytesIO(jsonl_bytes(*messages, character_name=character_name))


def message_memories(chat: Chat | int) -> list[Memory]:
    chat_id = getattr(chat, "pk", chat)
    return list(Memory.objects.filter(chat_id=chat_id, kind="message").order_by("message_index"))


def by_index(chat: Chat | int) -> dict[int, Memory]:
    return {m.message_index: m for m in message_memories(chat)}


def unit(*values: float, dim: int = 16) -> list[float]:
    """A unit vector of `dim` whose first components are `values`."""
    vector = [float(v) for v in values] + [0.0] * (dim - len(values))
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def if_match_stored(chat: Chat) -> dict:
    """If-Match with the chat's integrity as stored now (not as the object in hand last saw it), for a test that
    writes the same chat several times."""
    return {"HTTP_IF_MATCH": f'"{Chat.objects.get(pk=chat.pk).integrity}"'}


def assert_deferred_constraints_hold() -> None:
    """A test's transaction never commits, so deferred constraints (one memory per message index) are checked here,
    as the commit would check them."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def hnsw_indexes() -> dict[str, tuple[int, list[str] | None, bool]]:
    """Each HNSW index of memories: its oid (a rebuilt index is a new one), its options, whether it is valid."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, c.oid, c.reloptions, i.indisvalid
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
            WHERE i.indrelid = 'memories_memory'::regclass AND am.amname = 'hnsw'
            """
        )
        return {name: (oid, options, valid) for name, oid, options, valid in cursor.fetchall()}


def hits_read(queries) -> list[str]:
    """The statements of captured `queries` that read search hits' memories (apps/memories/search/ranking.py)."""
    read = re.compile(r"SELECT id, .* FROM memories_memory WHERE")
    return [q["sql"] for q in queries.captured_queries if read.match(q["sql"])]
