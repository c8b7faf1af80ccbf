"""Embedding providers over real HTTP (and the packaged local model), the (model, text) cache, and batching."""

import math

import numpy
import pytest

from apps.chats.services.chats import chat_import
from apps.memories.embedding_local import local_runtime
from apps.memories.embeddings import (
    EmbeddingConfig,
    EmbeddingUnavailable,
    _embed_local,
    config_for,
    embed_query,
    embed_texts,
    text_hash,
)
from apps.memories.models import EmbeddingCache, EmbeddingSettings, Memory
from apps.memories.services.indexing import memories_embed_pending
from apps.memories.services.memories import memory_create
from apps.memories.services.settings import embedding_settings_set
from tests.chats.factories import CharacterFactory
from tests.memories.helpers import jsonl, message_memories

pytestmark = pytest.mark.django_db


def _openai(server, **kwargs) -> EmbeddingConfig:
    return EmbeddingConfig(provider="openai", model="m", base_url=f"{server.url}/v1", **kwargs)


def _cosine(a, b) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


# -------------------------------------------------------------------------------------------------- providers


def test_openai_provider_sends_model_key_and_dimensions_and_keeps_the_input_order(embedder):
    config = _openai(embedder, api_key="secret", dimensions=16)
    vectors = embed_texts(config, ["first text", "second text", "third text"])
    assert vectors == [
        pytest.approx(embedder.vector_for(t, "m"), abs=1e-6) for t in ("first text", "second text", "third text")
    ]
    [request] = embedder.requests
    assert request.path == "/v1/embeddings" and request.model == "m"
    assert request.authorization == "Bearer secret" and request.body["dimensions"] == 16
    assert config.key == "openai:m@16"
    assert set(EmbeddingCache.objects.values_list("model", flat=True)) == {"openai:m@16"}


def test_ollama_provider_posts_to_api_embed(embedder):
    config = EmbeddingConfig(provider="ollama", model="nomic-embed-text", base_url=embedder.url)
    assert embed_texts(config, ["a lantern"]) == [pytest.approx(embedder.vector_for("a lantern", "nomic-embed-text"))]
    assert [(r.path, r.model, r.texts) for r in embedder.requests] == [
        ("/api/embed", "nomic-embed-text", ["a lantern"])
    ]
    assert config.key == "ollama:nomic-embed-text"


def test_local_provider_embeds_offline_with_the_packaged_minilm():
    config = EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2")
    cat, kitten, tax = embed_texts(config, ["A cat sleeps on the mat.", "A kitten naps on a rug.", "Taxes are due."])
    assert len(cat) == 384 and config.key == "local:all-MiniLM-L6-v2"
    assert _cosine(cat, kitten) > _cosine(cat, tax) + 0.2


def test_the_local_model_in_bfloat16_gives_the_vectors_of_float32_to_a_cosine_of_four_nines(settings):
    config = EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2")
    texts = ["Mira lit the lantern at the ford.", "The ferryman wanted two silver coins.", "Taxes are due."]
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "float32"
    full = _embed_local(config, texts)
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "bfloat16"
    assert local_runtime(config.model) == "torch-bfloat16"
    half = _embed_local(config, texts)
    assert half != full  # the setting took effect: the products were computed in bfloat16
    assert min(_cosine(a, b) for a, b in zip(full, half, strict=True)) > 0.9999


def test_an_unknown_precision_is_refused_naming_the_setting(settings):
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "float16"
    with pytest.raises(EmbeddingUnavailable, match="LOREKEEPER_EMBEDDINGS_PRECISION must be one of auto, float32"):
        embed_texts(EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2"), ["A lantern."])
    assert not EmbeddingCache.objects.exists()


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_a_failing_provider_raises_embedding_unavailable_and_caches_nothing(embedder, provider):
    embedder.fail_status = 500
    base = f"{embedder.url}/v1" if provider == "openai" else embedder.url
    config = EmbeddingConfig(provider=provider, model="m", base_url=base)
    with pytest.raises(EmbeddingUnavailable):
        embed_texts(config, ["anything"])
    assert embed_query(config, ["anything"]) is None
    assert not EmbeddingCache.objects.exists()


def test_a_provider_answering_fewer_vectors_than_asked_is_refused(embedder):
    embedder.drop_last = True
    with pytest.raises(EmbeddingUnavailable):
        embed_texts(_openai(embedder), ["one", "two"])


def test_an_unreachable_provider_is_unavailable(embedder):
    embedder.stop()
    with pytest.raises(EmbeddingUnavailable):
        embed_texts(EmbeddingConfig(provider="ollama", model="m", base_url=embedder.url), ["hello"])


def test_switched_off_embeddings_give_no_query_vector(embedder):
    assert embed_query(EmbeddingConfig(provider="none", model=""), ["hello"]) is None
    assert embedder.requests == []


# ------------------------------------------------------------------------------------------------------ cache


def test_a_search_reads_the_local_models_vectors_from_the_cache_but_does_not_store_its_own():
    """A search's query embedded by the local model is not cached (a few ms to compute again, an INSERT on the
    person's wait, and the cache would keep every query for good), but a text already cached is read from it."""
    config = EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2")
    embed_texts(config, ["Mira lit the lantern at the ford."])  # as indexing a message does
    marked = [1.0] + [0.0] * 383
    EmbeddingCache.objects.filter(content_hash=text_hash("Mira lit the lantern at the ford.")).update(vector=marked)
    known, new = embed_query(config, ["Mira lit the lantern at the ford.", "Who lit the lantern?"])
    assert known == pytest.approx(marked)  # read from the cache, not computed
    assert len(new) == 384 and _cosine(new, embed_texts(config, ["Who lit the lantern?"], store=False)[0]) > 0.9999
    assert list(EmbeddingCache.objects.values_list("content_hash", flat=True)) == [
        text_hash("Mira lit the lantern at the ford.")
    ]


def test_a_search_stores_a_remote_providers_vectors(embedder):
    config = _openai(embedder)
    first = embed_query(config, ["Who lit the lantern?"])
    assert embed_query(config, ["Who lit the lantern?"]) == [pytest.approx(first[0], abs=1e-6)]
    assert len(embedder.requests) == 1
    assert EmbeddingCache.objects.filter(content_hash=text_hash("Who lit the lantern?")).exists()


def test_identical_text_is_embedded_once(embedder):
    config = _openai(embedder)
    first = embed_texts(config, ["the tide", "the moon", "the tide"])
    assert embedder.embedded_texts() == ["the tide", "the moon"]
    again = embed_texts(config, ["the moon", "the tide"])
    assert again == [pytest.approx(first[1], abs=1e-6), pytest.approx(first[0], abs=1e-6)]
    assert len(embedder.requests) == 1
    assert EmbeddingCache.objects.get(content_hash=text_hash("the tide")).dim == 16


def test_vectors_are_stored_as_the_provider_gave_them_in_the_cache_and_on_the_memory(user, scripted):
    chat = chat_import(user=user, stream=jsonl(("Mira", "The lantern went out."), ("You", "Relight it.")))
    from apps.memories.services.indexing import chat_index_messages

    chat_index_messages(chat_id=chat.pk)
    assert memories_embed_pending(user_id=user.pk) == 2
    for memory in message_memories(chat):
        given = numpy.float32(scripted.vector_for(memory.content, "scripted"))  # what a vector column holds
        cached = EmbeddingCache.objects.get(model="openai:scripted", content_hash=text_hash(memory.content))
        assert (cached.dim, memory.embedding_dim) == (len(given), len(given))
        assert numpy.array_equal(numpy.float32(cached.vector), given)
        assert numpy.array_equal(numpy.float32(memory.embedding), given)


def test_a_batch_mixing_vectors_of_two_lengths_stores_each_with_its_own(user, scripted):
    # A vector cached under the same key with another length (the same model name on two servers of one kind).
    EmbeddingCache.objects.create(
        model="openai:scripted", content_hash=text_hash("Mira: The lantern went out."), dim=3, vector=[0.6, 0.8, 0.0]
    )
    chat = chat_import(user=user, stream=jsonl(("Mira", "The lantern went out."), ("You", "Relight it.")))
    from apps.memories.services.indexing import chat_index_messages

    chat_index_messages(chat_id=chat.pk)
    assert memories_embed_pending(user_id=user.pk) == 2
    dims = {memory.content: (memory.embedding_dim, len(memory.embedding)) for memory in message_memories(chat)}
    assert dims == {"Mira: The lantern went out.": (3, 3), "You: Relight it.": (16, 16)}


def test_the_cache_is_kept_per_model(embedder):
    embed_texts(_openai(embedder), ["the tide"])
    embed_texts(EmbeddingConfig(provider="openai", model="other", base_url=f"{embedder.url}/v1"), ["the tide"])
    assert [r.model for r in embedder.requests] == ["m", "other"]


def test_a_second_chat_or_memory_with_the_same_text_causes_no_provider_call(
    user, other_user, scripted, django_capture_on_commit_callbacks
):
    lines = (("Mira", "The lantern went out."), ("You", "Relight it."))
    with django_capture_on_commit_callbacks(execute=True):
        chat_import(user=user, stream=jsonl(*lines))
    assert len(scripted.requests) == 1
    scripted.forget()
    with django_capture_on_commit_callbacks(execute=True):
        again = chat_import(user=other_user, stream=jsonl(*lines))
        character = CharacterFactory(user=user)
        fact = memory_create(user=user, character=character, kind="fact", content="Mira: The lantern went out.")
    assert scripted.requests == []
    assert {m.embedding_model for m in message_memories(again)} == {"openai:scripted"}
    assert Memory.objects.get(pk=fact.pk).embedding_model == "openai:scripted"


def test_texts_go_to_the_provider_in_batches_of_at_most_the_batch_size(user, scripted, settings):
    settings.LOREKEEPER_EMBEDDINGS_BATCH = 3
    embed_texts(config_for(user), [f"text number {i}" for i in range(7)])
    assert [len(r.texts) for r in scripted.requests] == [3, 3, 1]

    scripted.forget()
    chat = chat_import(user=user, stream=jsonl(*[("Mira", f"Line {i}") for i in range(8)]))
    from apps.memories.services.indexing import chat_index_messages

    chat_index_messages(chat_id=chat.pk)
    assert memories_embed_pending(user_id=user.pk) == 8
    assert [len(r.texts) for r in scripted.requests] == [3, 3, 2]


# ------------------------------------------------------------------------------------------------ user config


def test_a_users_own_provider_overrides_the_deployment_and_keeps_the_key_encrypted(user, other_user, scripted):
    embedding_settings_set(user=user, provider="ollama", model="nomic", base_url=scripted.url, api_key="s3cret")
    stored = EmbeddingSettings.objects.get(user=user)
    assert stored.api_key_encrypted and "s3cret" not in stored.api_key_encrypted
    mine = config_for(user)
    assert (mine.provider, mine.model, mine.base_url, mine.api_key, mine.key) == (
        "ollama",
        "nomic",
        scripted.url,
        "s3cret",
        "ollama:nomic",
    )
    assert config_for(other_user).key == "openai:scripted"
    # Omitting the key keeps it; "" clears it; "deployment" drops the user's own settings.
    embedding_settings_set(user=user, provider="ollama", model="nomic", base_url=scripted.url)
    assert config_for(user).api_key == "s3cret"
    embedding_settings_set(user=user, provider="ollama", model="nomic", base_url=scripted.url, api_key="")
    assert config_for(user).api_key == ""
    embedding_settings_set(user=user, provider="deployment")
    assert config_for(user).key == "openai:scripted"
