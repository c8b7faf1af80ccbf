"""What the story page's pictures draw, read for the requesting user (another user's chat is a 404): the chat's
scenes and threads on the timeline, the current relationship readings for the graph."""

from __future__ import annotations

import re

from django.contrib.auth.models import AbstractUser
from django.db.models import Q
from django.http import Http404

from apps.chats.models import Chat
from apps.extraction.models import Scene
from apps.extraction.services.story_pictures.graph import Relation, graph_layout
from apps.extraction.services.story_pictures.timeline import NARROW, WIDE, Span, timeline_layout, timeline_nav
from apps.memories.models import Kind, Memory, Status

MAX_ARCS = 300
MAX_RELATIONS = 60
_ARROW_STOP = re.compile(r"[:→>]")


def arrow_read(text: str) -> tuple[str, str, str] | None:
    """ "A → B: rest" (or "A -> B: rest"), the way a relationship's text begins, as (A, B, rest); else None. Read
    without one regular expression: its lazy parts, each followed by spaces, tried every split of a run of spaces,
    and a memory's text of 10,000 spaces took minutes."""
    stop = _ARROW_STOP.search(text)
    if stop is None:
        return None
    at = stop.start()
    if text[at] == "→":
        a, after = text[:at], text[at + 1 :]
    elif text[at] == ">" and text[at - 1 : at] == "-":
        a, after = text[: at - 1], text[at + 1 :]
    else:  # a colon, or a ">" of no arrow, before any arrow
        return None
    b, colon, rest = after.partition(":")
    a, b = a.strip(), b.strip()
    return (a, b, rest.lstrip()) if a and b and colon else None


def _own(user: AbstractUser, chat: Chat) -> None:
    if chat.user_id != user.pk:
        raise Http404("No such chat.")


def _messages(start: int, end: int) -> str:
    return f"messages #{start}–#{end - 1}" if end - 1 > start else f"message #{start}"


def scene_spans(*, user: AbstractUser, chat: Chat) -> list[Span]:
    """Every scene of the chat, in order, then the messages since the last break (the scene still going on)."""
    _own(user, chat)
    rows = Scene.objects.filter(user=user, chat=chat).order_by("start_index")
    spans = []
    for ordinal, (pk, start, end, name) in enumerate(rows.values_list("pk", "start_index", "end_index", "name"), 1):
        label = name or f"Scene {ordinal}"
        title = f"{name} (scene {ordinal})" if name else label
        spans.append(Span(start, end, label, f"{title} · {_messages(start, end)}", ref=pk))
    after = spans[-1].end if spans else 0
    if after < chat.message_count:
        title = f"Since the last scene break · {_messages(after, chat.message_count)}"
        spans.append(Span(after, chat.message_count, "now", title, kind="gap"))
    return spans


def _first(memory_like: dict) -> int | None:
    if memory_like["valid_from"] is not None:
        return memory_like["valid_from"]
    indices = memory_like["source_message_indices"] or []
    if indices:
        return min(indices)
    return memory_like["message_index"]


def arc_spans(*, user: AbstractUser, chat: Chat) -> list[Span]:
    """The chat's threads over the messages they span: an open one from where it was raised to the chat's end (it
    is still going on); a settled one from where the thread it settled was raised to where it was settled. Threads
    read from other chats (a character's persistent arcs) are numbered by those chats' messages: not drawn here."""
    _own(user, chat)
    fields = ("pk", "content", "data", "valid_from", "valid_to", "source_message_indices", "message_index")
    arcs = list(
        Memory.objects.filter(user=user, kind=Kind.ARC, status=Status.ACTIVE)
        .filter(Q(source_chat=chat) | Q(chat=chat, source_chat__isnull=True))
        .order_by("created_at", "id")
        .values(*fields)[:MAX_ARCS]
    )
    settled = [arc["pk"] for arc in arcs if arc["data"].get("status") == "resolved"]
    raised: dict[int, int] = {}
    earlier = Memory.objects.filter(user=user, kind=Kind.ARC, superseded_by__in=settled)
    for row in earlier.values("superseded_by_id", "valid_from", "source_message_indices", "message_index"):
        first = _first(row)
        if first is not None:
            raised[row["superseded_by_id"]] = min(first, raised.get(row["superseded_by_id"], first))
    spans = []
    for arc in arcs:
        first = _first(arc)
        if first is None:
            continue
        if arc["data"].get("status") == "resolved":
            last = max(arc["source_message_indices"] or [first]) + 1
            start = raised.get(arc["pk"], first)
            thread = arc["data"].get("thread")
            thread = thread if isinstance(thread, str) and thread.strip() else arc["content"]  # a client's: any JSON
            title = f"Settled: {arc['content']} (the thread: {thread}) · {_messages(start, last)}"
            spans.append(Span(start, max(last, start + 1), thread, title, kind="settled", ref=arc["pk"]))
        else:
            last = arc["valid_to"] if arc["valid_to"] is not None else chat.message_count
            ongoing = arc["valid_to"] is None
            title = f"Open thread: {arc['content']} · from message #{first}" + (", still open" if ongoing else "")
            spans.append(
                Span(first, max(last, first + 1), arc["content"], title, kind="open", ref=arc["pk"], ongoing=ongoing)
            )
    return spans


def story_timeline(*, user: AbstractUser, chat: Chat, start: int, end: int) -> dict:
    """The timeline of the window [start, end) of the chat: its wide and narrow layouts, and the zoom and paging
    choices. Nothing to draw in a chat without messages."""
    count = chat.message_count
    if count == 0 or end <= start:
        return {"empty": True, "start": 0, "end": 0, "count": count}
    scenes, arcs = scene_spans(user=user, chat=chat), arc_spans(user=user, chat=chat)
    shown = [s for s in scenes if s.kind == "scene" and s.end > start and s.start < end]
    return {
        "empty": False,
        "start": start,
        "end": end,
        "last": end - 1,
        "count": count,
        "scene_count": len(shown),
        "arc_count": sum(1 for a in arcs if a.end > start and a.start < end),
        "nav": timeline_nav(count=count, start=start, end=end),
        "wide": timeline_layout(start=start, end=end, scenes=scenes, arcs=arcs, width=WIDE),
        "narrow": timeline_layout(start=start, end=end, scenes=scenes, arcs=arcs, width=NARROW),
    }


def _names(chat: Chat, characters: list, memories: list[Memory]) -> dict[str, str]:
    """The names as written, by their lower case: a reading's pair is kept in lower case."""
    names = {name.lower(): name for name in (chat.user_name, chat.character_name) if name}
    names |= {c.name.lower(): c.name for c in characters}
    for memory in memories:
        names |= {e.name.lower(): e.name for e in memory.entities.all() if e.name.lower() not in names}
    return names


def _ends(memory: Memory) -> tuple[str, str] | None:
    """Who feels and towards whom: the pair the extraction keeps, the subject and target an imported reading
    keeps, else the "A → B: …" its text begins with."""
    data = memory.data or {}
    pair = data.get("pair")
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) and p.strip() for p in pair):
        return pair[0].strip(), pair[1].strip()
    if data.get("subject") and data.get("target"):
        return str(data["subject"]).strip(), str(data["target"]).strip()
    read = arrow_read(memory.content)
    return (read[0], read[1]) if read else None


def _descriptors(memory: Memory) -> tuple[str, ...]:
    """The descriptors, strongest first: (word, magnitude) pairs from the extraction, plain words when imported."""
    rank = {"high": 0, "strong": 0, "medium": 1, "moderate": 1, "low": 2, "weak": 2}
    words = []
    listed = (memory.data or {}).get("descriptors")
    for position, item in enumerate(listed if isinstance(listed, list) else []):
        if isinstance(item, list) and item:
            word, magnitude = item[0], item[1] if len(item) > 1 else ""
        elif isinstance(item, str):
            word, magnitude = item, ""
        else:
            continue
        if str(word).strip():
            words.append((rank.get(str(magnitude).lower(), 1), position, str(word).strip()))
    if not words and (read := arrow_read(memory.content)):
        words = [(1, i, w.strip()) for i, w in enumerate(re.split(r"[,;]", read[2])) if w.strip()]
    return tuple(word for _, _, word in sorted(words))


def relationship_readings(*, user: AbstractUser, chat: Chat) -> list[dict]:
    """The current reading of each ordered pair (the newest, should two be active), seen as the rest of the story
    page sees memories: this chat's, and its characters' persistent ones."""
    _own(user, chat)
    characters = list(chat.characters.all())
    memories = list(
        Memory.objects.filter(user=user, kind=Kind.RELATIONSHIP, status=Status.ACTIVE)
        .filter(Q(chat=chat) | Q(chat__isnull=True, character__in=characters))
        .defer("embedding")
        .prefetch_related("entities")
        .order_by("-created_at", "-id")[: MAX_RELATIONS * 2]
    )
    names = _names(chat, characters, memories)
    readings, seen = [], set()
    for memory in memories:
        ends = _ends(memory)
        if ends is None:
            continue
        source, target = (names.get(end.lower(), end if end != end.lower() else end.title()) for end in ends)
        if (source.lower(), target.lower()) in seen or source.lower() == target.lower():
            continue
        seen.add((source.lower(), target.lower()))
        readings.append({"memory": memory, "source": source, "target": target, "descriptors": _descriptors(memory)})
    readings.sort(key=lambda r: (r["source"].lower(), r["target"].lower()))
    return readings[:MAX_RELATIONS]


def relationship_graph(*, user: AbstractUser, chat: Chat) -> dict:
    """The graph of the current readings, and the readings themselves for the list that says it in words."""
    readings = relationship_readings(user=user, chat=chat)
    relations = [
        Relation(
            source=r["source"],
            target=r["target"],
            descriptors=r["descriptors"],
            confidence=r["memory"].confidence,
            title=f"{r['memory'].content} · confidence {r['memory'].confidence:.2f}",
            ref=r["memory"].pk,
        )
        for r in readings
    ]
    return {"layout": graph_layout(relations=relations), "readings": readings}
