"""The existing memories a candidate is compared with: nearest by cosine in pgvector (same kind, and other kinds for
the cross-type check), and by word overlap where no vector of the current model is to be had."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from apps.memories.models import Memory, Retired, Status
from apps.memories.search.candidates import OWN_WORDS, owner_word, scope_size, vector_candidates
from apps.memories.services.lifecycle.scope import DEDUP_KINDS, ScopeKey, lifecycle_config
from apps.memories.services.lifecycle.similarity import jaccard, words

TEXT_PRESELECT = 200


@dataclass
class Neighbour:
    memory: Memory
    similarity: float
    method: str  # "hash", "embedding" or "jaccard"
    same_kind: bool


class _Where:
    """The (where, params) pair search's candidate queries take."""

    def __init__(self, where: str, params: list, user_id: int) -> None:
        self.where, self.params, self.user_id = where, params, user_id


def _where(scope: ScopeKey, kinds: list[str]) -> _Where:
    sql, params = scope.sql()
    return _Where(f"{sql} AND m.status = %s AND m.kind = ANY(%s)", [*params, Status.ACTIVE, kinds], scope.user_id)


class NeighbourFinder:
    """Per batch: scope sizes are measured once per kind set (search decides between exact and HNSW scans by it)."""

    def __init__(self, scope: ScopeKey, *, k: int) -> None:
        self.scope, self.k = scope, k
        self._sizes: dict[tuple, int] = {}
        self._vectorless: dict[str, bool] = {}

    def has_vectorless(self, model_key: str) -> bool:
        """Whether the scope holds memories without a vector of `model_key` (asked once per batch; a batch that
        stores one says so through `stored_vectorless`)."""
        if model_key not in self._vectorless:
            qs = Memory.objects.filter(self.scope.q(), status=Status.ACTIVE, kind__in=DEDUP_KINDS)
            self._vectorless[model_key] = (
                qs.filter(embedding__isnull=True).exists() or qs.exclude(embedding_model=model_key).exists()
            )
        return self._vectorless[model_key]

    def stored_vectorless(self) -> None:
        self._vectorless = {key: True for key in self._vectorless}

    def _size(self, where: _Where, kinds: list[str]) -> int:
        key = tuple(kinds)
        if key not in self._sizes:
            self._sizes[key] = scope_size(where)
        return self._sizes[key]

    def by_hash(self, *, kind: str, content_hash: str) -> Memory | None:
        return (
            Memory.objects.filter(self.scope.q(), kind=kind, status=Status.ACTIVE, content_hash=content_hash)
            .defer("embedding")
            .first()
        )

    def retired_by_person(
        self, *, kind: str, content_hash: str, vector: list[float] | None, model_key: str, duplicate: float
    ) -> Neighbour | None:
        """A memory of `kind` a person retired whose text is the candidate's, or whose vector is at least
        `duplicate` like it: what extraction must not write again."""
        retired = Memory.objects.filter(
            self.scope.q(), kind=kind, status=Status.RETIRED, superseded_by__isnull=True
        ).exclude(retired_reason__in=Retired.BY_LIFECYCLE)
        same = retired.filter(content_hash=content_hash).defer("embedding").first()
        if same is not None:
            return Neighbour(same, 1.0, "hash", True)
        if vector is None:
            return None
        sql, params = self.scope.sql()
        where = _Where(
            f"{sql} AND m.status = %s AND m.kind = %s AND m.superseded_by_id IS NULL "
            f"AND NOT (m.retired_reason = ANY(%s))",
            [*params, Status.RETIRED, kind, list(Retired.BY_LIFECYCLE)],
            self.scope.user_id,
        )
        found = vector_candidates(where, vectors=[vector], model_key=model_key, k=1, size=0)
        best = [(pk, sim, True) for pk, sim in found.items() if sim >= duplicate]
        loaded = self._load(best, "embedding")
        return loaded[0] if loaded else None

    def by_vector(self, *, kind: str, vector: list[float], model_key: str) -> list[Neighbour]:
        found: list[tuple[int, float, bool]] = []
        other_kinds = [k for k in DEDUP_KINDS if k != kind]
        for kinds, k, same in (([kind], self.k, True), (other_kinds, 1, False)):
            where = _where(self.scope, kinds)
            # Measured once per batch: the batch's own writes can only grow it by a few rows, and an exact scan
            # of a scope that was empty at the start is cheap.
            size = self._size(where, kinds)
            best = vector_candidates(
                where, vectors=[vector], model_key=model_key, k=k, size=size, exact_max=lifecycle_config()["exact_max"]
            )
            found += [(pk, sim, same) for pk, sim in best.items()]
        return self._load(found, "embedding")

    def by_words(self, *, kind: str, content: str, model_key: str | None) -> list[Neighbour]:
        """Word-overlap neighbours among memories sharing a word with the candidate; with `model_key`, only among
        those that have no vector of that model (the others were compared by vector)."""
        terms = sorted(words(content))[:64]
        if not terms:
            return []
        where = _where(self.scope, list(DEDUP_KINDS))
        sql, params = where.where, list(where.params)
        if model_key:
            sql += " AND (m.embedding IS NULL OR m.embedding_model <> %s)"
            params.append(model_key)
        with connection.cursor() as cursor:
            # A query of stop words only is empty: ANDed with the owner's word it would match all their rows.
            cursor.execute(
                f"SELECT m.id, m.kind, m.content FROM memories_memory m, "
                f"(SELECT websearch_to_tsquery('english', %s) AS q) w WHERE {sql} "
                f"AND numnode(w.q) > 0 AND {OWN_WORDS} @@ (%s::tsquery && w.q) LIMIT {TEXT_PRESELECT}",
                [" or ".join(terms), *params, owner_word(self.scope.user_id)],
            )
            rows = cursor.fetchall()
        scored = [(pk, jaccard(content, text), row_kind == kind) for pk, row_kind, text in rows]
        same = sorted((s for s in scored if s[2]), key=lambda s: -s[1])[: self.k]
        other = sorted((s for s in scored if not s[2]), key=lambda s: -s[1])[:1]
        return self._load(same + other, "jaccard")

    @staticmethod
    def _load(found: list[tuple[int, float, bool]], method: str) -> list[Neighbour]:
        memories = Memory.objects.defer("embedding").in_bulk([pk for pk, _, _ in found])
        return [Neighbour(memories[pk], sim, method, same) for pk, sim, same in found if pk in memories]
