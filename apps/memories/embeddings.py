"""Embedding providers and the embedding cache.

Three providers: `local` (the packaged all-MiniLM-L6-v2, offline, in ONNX Runtime or PyTorch:
apps/memories/embedding_local.py), `openai` (any
OpenAI-compatible `/v1/embeddings`: OpenAI, vLLM, llama.cpp, LM Studio, Ollama's compatibility layer) and `ollama`
(Ollama's own `/api/embed`). The deployment chooses one (LOREKEEPER_EMBEDDINGS_*); a user may override it
(EmbeddingSettings). Every vector is stored with its model key, so vectors of different models are never compared:
changing the model re-embeds (apps.memories.services.indexing).

`embed_texts` looks each text up in EmbeddingCache by (model key, sha256 of the text) first and sends only the
misses to the provider, in batches; identical text is never embedded twice.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import httpx
import numpy as np
from django.conf import settings
from django.db import connection
from pgvector.psycopg.register import register_vector_info
from psycopg import Cursor
from psycopg.types import TypeInfo

from apps.common.exceptions import ApplicationError
from apps.common.netguard import guarded_http_client, provider_url_check, trusted_http_client
from apps.common.secrets import secret_decrypt
from apps.memories.embedding_local import LocalModelUnavailable, encode_lock, local_encode, local_model
from apps.memories.models import EmbeddingCache, EmbeddingSettings

log = logging.getLogger(__name__)

DEFAULT_MODELS = {"local": "all-MiniLM-L6-v2", "openai": "text-embedding-3-small", "ollama": "nomic-embed-text"}
# Where a remote provider is called when no URL is given. A default is held to the same address policy as a typed
# URL: a user's "ollama" with no URL must not reach the server's own loopback.
DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "ollama": "http://127.0.0.1:11434"}
PROVIDERS = ("local", "openai", "ollama", "none")


class EmbeddingUnavailable(Exception):
    """No vector can be had: provider switched off, unreachable, misconfigured or answering nonsense."""


@dataclass(frozen=True)
class EmbeddingConfig:
    provider: str
    model: str
    base_url: str = ""
    api_key: str = ""
    dimensions: int | None = None
    batch_size: int = 128
    timeout: float = 30.0
    retries: int = 2
    # The operator's own provider (LOREKEEPER_EMBEDDINGS_*) may be on the private network; a user's may not.
    trusted: bool = False

    @property
    def url(self) -> str:
        return self.base_url or DEFAULT_URLS.get(self.provider, "")

    @property
    def key(self) -> str:
        """What a stored vector is labelled with: vectors compare only under the same key."""
        if self.provider == "none":
            return ""
        suffix = f"@{self.dimensions}" if self.dimensions else ""
        return f"{self.provider}:{self.model}{suffix}"

    @property
    def enabled(self) -> bool:
        return self.provider != "none"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def vector_literal(vector: Sequence[float]) -> str:
    """A vector as pgvector's text form, '[x,y,...]', for a `%s::vector` parameter (or an element of a text array
    cast to vector[]: many vectors in one statement)."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


# The vector type as each database connection knows it (its oid differs between databases): looked up once a
# connection, for vector_writer.
_VECTOR_TYPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@contextmanager
def vector_writer() -> Iterator:
    """A cursor of the current database connection that sends its parameters bound, and numpy vectors among them in
    pgvector's binary form (`%b::vector[]` given a list of arrays). Django's cursors quote every parameter into the
    statement's text, where a vector is its floats formatted one by one in Python and parsed again by PostgreSQL:
    a batch of 256 vectors written to the cache and the memories took 220 ms that way and takes 65 ms here, beside
    the local model's 1,000–1,200 ms."""
    connection.ensure_connection()
    raw = connection.connection
    info = _VECTOR_TYPES.get(raw)
    if info is None:
        info = _VECTOR_TYPES[raw] = TypeInfo.fetch(raw, "vector")
    with Cursor(raw) as cursor:
        register_vector_info(cursor, info)  # this cursor's adapters only: what other queries read is unchanged
        yield cursor


def vectors_array(vectors: Sequence[Sequence[float]]) -> list:
    """`vectors` as a vector_writer's `%b::vector[]` parameter; each may have a length of its own (a batch that
    mixes cached vectors with new ones)."""
    return [np.asarray(vector, dtype=np.float32) for vector in vectors]


def deployment_config() -> EmbeddingConfig:
    provider = settings.LOREKEEPER_EMBEDDINGS_PROVIDER
    return EmbeddingConfig(
        provider=provider,
        model=settings.LOREKEEPER_EMBEDDINGS_MODEL or DEFAULT_MODELS.get(provider, ""),
        base_url=settings.LOREKEEPER_EMBEDDINGS_URL,
        api_key=settings.LOREKEEPER_EMBEDDINGS_API_KEY,
        dimensions=settings.LOREKEEPER_EMBEDDINGS_DIMENSIONS,
        batch_size=settings.LOREKEEPER_EMBEDDINGS_BATCH,
        timeout=settings.LOREKEEPER_EMBEDDINGS_TIMEOUT,
        trusted=True,
    )


def config_for(user) -> EmbeddingConfig:
    """The user's own provider if they set one, else the deployment's. Every search asks: whether the user set one
    is read by a written query (most have not, and the ORM's get and its DoesNotExist took about two and a half
    times as long)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {EmbeddingSettings._meta.db_table} WHERE user_id = %s", [user.pk])
        if cursor.fetchone() is None:
            return deployment_config()
    own = EmbeddingSettings.objects.get(user=user)
    base = deployment_config()
    return EmbeddingConfig(
        provider=own.provider,
        model=own.model or DEFAULT_MODELS.get(own.provider, ""),
        base_url=own.base_url,
        api_key=secret_decrypt(own.api_key_encrypted),
        dimensions=own.dimensions,
        batch_size=base.batch_size,
        timeout=base.timeout,
    )


# --- providers ---------------------------------------------------------------------------------------------------


def local_model_load(*, background: bool) -> None:
    """Load the deployment's local model now, so that no request or task waits for it (several seconds of imports
    and weights on a small CPU, and the first start's export: apps/memories/embedding_local.py): in a thread at a web
    server's start, or before a Celery worker forks its processes, which then share the loaded weights. Nothing
    happens for remote providers."""
    config = deployment_config()
    if config.provider != "local":
        return

    def load() -> None:
        try:
            local_model(config.model)
        except LocalModelUnavailable as exc:
            log.warning("local embedding model not loaded: %s", exc)

    if background:
        threading.Thread(target=load, name="embedding-warm-up", daemon=True).start()
    else:
        load()


def _embed_local(config: EmbeddingConfig, texts: list[str]) -> list[list[float]]:
    try:
        return local_encode(config.model, texts).tolist()
    except LocalModelUnavailable as exc:
        raise EmbeddingUnavailable(str(exc)) from exc


def _embed_openai(config: EmbeddingConfig, texts: list[str]) -> list[list[float]]:
    import openai

    client = openai.OpenAI(
        base_url=config.url,
        api_key=config.api_key or "unused",
        timeout=config.timeout,
        max_retries=config.retries,
        http_client=_http_client(config),
    )
    extra = {"dimensions": config.dimensions} if config.dimensions else {}
    try:
        answer = client.embeddings.create(model=config.model, input=texts, **extra)
    except openai.APIStatusError as exc:
        # The status only: the body could be any service's page (apps/llm/client.py says the same of models).
        raise EmbeddingUnavailable(f"Embedding endpoint refused the request ({exc.status_code})") from exc
    except openai.OpenAIError as exc:
        raise EmbeddingUnavailable(f"Embedding endpoint failed: {type(exc).__name__}") from exc
    ordered = sorted(answer.data, key=lambda item: item.index)
    return [list(item.embedding) for item in ordered]


def _embed_ollama(config: EmbeddingConfig, texts: list[str]) -> list[list[float]]:
    url = config.url.rstrip("/") + "/api/embed"
    body: dict = {"model": config.model, "input": texts}
    if config.dimensions:
        body["dimensions"] = config.dimensions
    try:
        response = _http_client(config).post(url, json=body, timeout=config.timeout)
        response.raise_for_status()
        return response.json()["embeddings"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        raise EmbeddingUnavailable(f"Ollama embed failed: {exc}") from exc


_PROVIDERS = {"local": _embed_local, "openai": _embed_openai, "ollama": _embed_ollama}


def _http_client(config: EmbeddingConfig) -> httpx.Client:
    """Never following a redirect; a user's URL also under the address policy at every connection
    (apps/common/netguard.py)."""
    return trusted_http_client() if config.trusted else guarded_http_client()


def _call_provider(config: EmbeddingConfig, texts: list[str]) -> list[list[float]]:
    if not config.enabled:
        raise EmbeddingUnavailable("Embeddings are switched off.")
    if config.url and not config.trusted:
        try:
            provider_url_check(config.url)
        except ApplicationError as exc:
            raise EmbeddingUnavailable(exc.message) from exc
    vectors = _PROVIDERS[config.provider](config, texts)
    if len(vectors) != len(texts) or not vectors or len({len(v) for v in vectors}) != 1 or not len(vectors[0]):
        raise EmbeddingUnavailable("The provider answered a different number or shape of vectors than asked.")
    return vectors


def _as_list(vector) -> list[float]:
    return vector.tolist() if hasattr(vector, "tolist") else list(vector)


# --- with the cache ----------------------------------------------------------------------------------------------


def embed_texts(config: EmbeddingConfig, texts: Sequence[str], *, store: bool = True) -> list[list[float]]:
    """One vector per text, from the cache where present; misses go to the provider in batches and are cached
    (`store`)."""
    hashes = [text_hash(t) for t in texts]
    found: dict[str, list[float]] = {}
    for start in range(0, len(hashes), 1000):
        chunk = set(hashes[start : start + 1000])
        for content_hash, vector in EmbeddingCache.objects.filter(
            model=config.key, content_hash__in=chunk
        ).values_list("content_hash", "vector"):
            found[content_hash] = _as_list(vector)
    missing = list({h: t for h, t in zip(hashes, texts, strict=True) if h not in found}.items())
    for start in range(0, len(missing), config.batch_size):
        batch = missing[start : start + config.batch_size]
        vectors = _call_provider(config, [text for _, text in batch])
        if store:
            _cache_store(config.key, [h for h, _ in batch], vectors)
        found.update({h: v for (h, _), v in zip(batch, vectors, strict=True)})
    return [found[h] for h in hashes]


def _cache_store(model_key: str, hashes: list[str], vectors: list[list[float]]) -> None:
    """Cache a batch in one statement: its hashes and vectors as two arrays (one row each, as EmbeddingCache's
    bulk_create would write, without its per-field work in Python). A text cached meanwhile is left as it is."""
    with vector_writer() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_embeddingcache (model, content_hash, dim, vector, created_at)
            SELECT %s, u.hash, vector_dims(u.vector), u.vector, now()
            FROM unnest(%s::text[], %b::vector[]) AS u(hash, vector)
            ON CONFLICT (model, content_hash) DO NOTHING
            """,
            [model_key, hashes, vectors_array(vectors)],
        )


QUERY_TIMEOUT = 10.0


def embed_query(config: EmbeddingConfig, sentences: Sequence[str]) -> list[list[float]] | None:
    """Vectors for a search's sentences, or None when no embedding is possible (search falls back to text). A
    person is waiting: a remote provider gets one try of at most QUERY_TIMEOUT seconds.

    The cache is read (a recall's query is often a message already embedded), but the local model's vectors are not
    written to it: computing one again costs a few milliseconds, storing it an INSERT on the person's wait (about
    1 ms of the search API's), and every distinct query would stay in the cache for good. A remote provider's are
    stored: asking it again costs a round trip, and may cost the person money."""
    if not config.enabled or not sentences:
        return None
    try:
        return embed_texts(
            replace(config, timeout=min(config.timeout, QUERY_TIMEOUT), retries=0),
            sentences,
            store=config.provider != "local",
        )
    except EmbeddingUnavailable as exc:
        log.warning("search without vectors: %s", exc)
        return None


# A word for reads_words: a run of three letters or more.
_WORD = re.compile(r"[^\W\d_]{3,}")


def reads_words(config: EmbeddingConfig, text: str) -> bool:
    """Whether the local model reads a word of the text whole: its vocabulary holds at least one word of three
    letters or more as it stands, not split into pieces. A text of none (a string of no language, "zzzzqqq") gets a
    vector made of word pieces that is a little near everything, so search matches it by its words alone
    (docs/SEARCH.md). A remote provider's vocabulary is not known here: True."""
    if config.provider != "local":
        return True
    try:
        model = local_model(config.model)
    except LocalModelUnavailable:
        return True  # embedding the query will fail and say why
    words = dict.fromkeys(word.lower() for word in _WORD.findall(text))
    with encode_lock:  # the tokenizer is the model's, shared with encode()
        return any(model.word_pieces(word) == 1 for word in words)
