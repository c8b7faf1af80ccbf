"""What a search query names, for memory_search's signals (docs/SEARCH.md): the entities (graph), the speakers of
chat turns (speaker) and the dates (time, apps/memories/search/dates.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.auth.models import AbstractUser
from django.db import connection
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from apps.memories.models import Entity, Kind, Memory
from apps.memories.search.dates import Period, query_periods

_WORD = re.compile(r"\w+", re.UNICODE)
# Speaker names that are words of every other question ("What did you say?"): never taken as naming the speaker.
_PRONOUNS = frozenset({"i", "me", "you", "we", "us", "he", "him", "she", "her", "they", "them", "it"})


@dataclass
class Named:
    """What the query names: memories linked to an entity it names, chat turns spoken by someone it names, and the
    periods of story time it names."""

    linked: set[int]
    spoken: set[int]
    periods: list[Period]


def query_named(*, query: str, rows: dict[int, tuple], config: dict) -> Named:
    """What the query names among the candidate `rows`, which were read with whether they are linked to an entity
    the query names (`row.linked`, from `entities_named`) and, only when the speaker signal weighs something, with
    their speakers."""
    return Named(
        linked={pk for pk, row in rows.items() if row.linked},
        spoken=_spoken_by_named(query=query, rows=rows) if config["weights"]["speaker"] else set(),
        periods=query_periods(query, slack_days=config["time_slack_days"]),
    )


def graph_linked(*, entity_ids: list[int], memory_ids: list[int]) -> set[int]:
    if not entity_ids or not memory_ids:
        return set()
    through = Memory.entities.through
    # The memories as one array parameter (a search's hundreds of candidates: see ranking.py `_id_in`).
    among = RawSQL(
        f'"{through._meta.db_table}"."memory_id" = ANY(%s::bigint[])', (list(memory_ids),), output_field=BooleanField()
    )
    return set(through.objects.filter(among, entity_id__in=entity_ids).values_list("memory_id", flat=True))


def _names(label: str, lowered: str, words: set[str]) -> bool:
    """Whether the query (`lowered`, its `words`) names `label`: a one-word name matches a word of the query; any
    other ("Jean-Luc", "O'Brien", "the Old Mill") the same text not inside a longer word."""
    label = label.lower().strip()
    if not label:
        return False
    if _WORD.fullmatch(label) is not None:
        return label in words
    return re.search(rf"(?<!\w){re.escape(label)}(?!\w)", lowered) is not None


def entities_named(*, user: AbstractUser, query: str, character_ids: list[int]) -> list[int]:
    """The ids of the user's entities (of `character_ids` or of none) whose name or an alias the query names. It
    needs neither the query's vector nor the candidates: a search finds them beside its other work, where the query
    is written out (the ORM composing it held the interpreter's lock for longer than the query ran, while the
    search's own thread needed it to embed)."""
    lowered = query.lower()
    words = set(_WORD.findall(lowered))
    table = Entity._meta.db_table
    own = "(character_id = ANY(%s) OR character_id IS NULL)" if character_ids else "TRUE"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, name, aliases FROM {table} WHERE user_id = %s AND {own}",
            [user.pk, list(character_ids)] if character_ids else [user.pk],
        )
        rows = cursor.fetchall()
    return [pk for pk, name, aliases in rows if any(_names(label, lowered, words) for label in (name, *aliases))]


def _spoken_by_named(*, query: str, rows: dict[int, tuple]) -> set[int]:
    """The chat turns among `rows` whose speaker (`row.speaker`, the message's name) the query names: who a
    question is about is most often who told it ("What did Mira find?")."""
    speakers: dict[str, list[int]] = {}
    for pk, row in rows.items():
        if row.kind == Kind.MESSAGE and row.speaker:
            speakers.setdefault(row.speaker, []).append(pk)
    if not speakers:
        return set()
    lowered = query.lower()
    words = set(_WORD.findall(lowered))
    return {
        pk
        for name, pks in speakers.items()
        if name.lower().strip() not in _PRONOUNS and _names(name, lowered, words)
        for pk in pks
    }
