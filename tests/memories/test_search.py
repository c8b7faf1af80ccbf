"""memory_search on controlled vectors (the scripted server answers the vectors each test gives) and texts."""

import json
import re
from datetime import UTC, datetime

import pytest

from apps.chats.services.chats import chat_create, chat_import
from apps.chats.services.messages import message_append
from apps.memories.apis.search import HIT_FIELDS
from apps.memories.models import Memory
from apps.memories.search import memory_search
from apps.memories.services.indexing import memories_embed_pending
from apps.memories.services.memories import memory_create, memory_retire
from apps.memories.services.settings import embedding_settings_set
from tests.chats.factories import CharacterFactory
from tests.memories.helpers import jsonl, message_memories, unit

pytestmark = pytest.mark.django_db


def remember(server, user, content, vector=None, *, character=None, chat=None, kind="fact", **fields) -> Memory:
    if vector is not None:
        server.vectors[content] = vector
    return memory_create(user=user, character=character, chat=chat, kind=kind, content=content, **fields)


def ids(outcome) -> list[int]:
    return [hit.memory.pk for hit in outcome.results]


def hits(outcome) -> dict:
    return {hit.memory.pk: hit for hit in outcome.results}


# ---------------------------------------------------------------------------------------------------- ranking


def test_the_nearest_vector_ranks_first(user, character, scripted):
    apples = remember(scripted, user, "Apples grow in the orchard.", unit(1, 0), character=character)
    boats = remember(scripted, user, "Boats rest in the harbour.", unit(0, 1), character=character)
    clouds = remember(scripted, user, "Clouds gather over the hills.", unit(1, 1), character=character)
    memories_embed_pending(user_id=user.pk)
    scripted.vectors["qzx"] = unit(0.2, 1)

    outcome = memory_search(user=user, query="qzx")

    assert outcome.method == "vector"  # no memory shares a word with the query
    # Apples (similarity 0.196) is under the floor of a match by meaning: noise, not a result.
    assert ids(outcome) == [boats.pk, clouds.pk] and apples.pk not in ids(outcome)
    similarities = [hit.signals["vector"] for hit in outcome.results]
    assert similarities == sorted(similarities, reverse=True) and similarities[0] == pytest.approx(0.98058, abs=1e-4)
    assert all(hit.signals["text"] is None for hit in outcome.results)
    assert outcome.results[0].score > outcome.results[1].score
    # By meaning alone, with no word in common: relevance is the meaning (similarity from the floor, 0.2, to 1)
    # weighted by its share of the fusion weights (1 of 2).
    assert outcome.results[0].relevance == pytest.approx((0.98058 - 0.2) / 0.8 / 2, abs=1e-4)


def _name_and_decoy(scripted, user, character):
    named = remember(scripted, user, "Corvin relit the lantern.", unit(0, 1), character=character)
    decoy = remember(scripted, user, "The keeper relit the lantern at dusk.", unit(1, 0.1), character=character)
    memories_embed_pending(user_id=user.pk)
    return named, decoy


def test_hybrid_search_beats_vector_only_on_a_name(user, character, scripted):
    named, decoy = _name_and_decoy(scripted, user, character)
    # Both queries get the same vector, nearer the decoy; only the second names anyone.
    scripted.vectors["qzx"] = scripted.vectors["Who is Corvin?"] = unit(1, 0.3)

    vector_only = memory_search(user=user, query="qzx")
    hybrid = memory_search(user=user, query="Who is Corvin?")

    assert vector_only.method == "vector" and ids(vector_only) == [decoy.pk, named.pk]
    assert hybrid.method == "hybrid" and ids(hybrid) == [named.pk, decoy.pk]
    found = hits(hybrid)
    assert found[decoy.pk].signals["vector"] > found[named.pk].signals["vector"]  # vectors alone got it wrong
    assert found[named.pk].signals["text"] > 0 and found[decoy.pk].signals["text"] is None


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_text_ranking_runs_beside_and_the_search_answers_the_same(user, character, scripted):
    from django.db import transaction

    named, decoy = _name_and_decoy(scripted, user, character)
    scripted.vectors["Who is Corvin?"] = unit(1, 0.3)

    beside = memory_search(user=user, query="Who is Corvin?")  # the text ranking on a connection of its own
    with transaction.atomic():
        here = memory_search(user=user, query="Who is Corvin?")  # in this thread, as a caller's transaction needs

    assert beside.method == here.method == "hybrid" and ids(beside) == ids(here) == [named.pk, decoy.pk]
    assert [hit.signals for hit in beside.results] == [hit.signals for hit in here.results]


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_entities_named_are_found_beside_and_boost_as_inside(user, character, scripted):
    from django.db import transaction

    plain = remember(scripted, user, "Someone left the gate open.", character=character)
    linked = memory_create(
        user=user, character=character, kind="fact", content="Someone left the gate open.",
        entities=[{"name": "Corvin", "type": "person"}],
    )  # fmt: skip
    memories_embed_pending(user_id=user.pk)

    beside = memory_search(user=user, query="Did Corvin leave the gate open?")  # count, words, names beside
    with transaction.atomic():
        here = memory_search(user=user, query="Did Corvin leave the gate open?")

    assert ids(beside) == ids(here) == [linked.pk, plain.pk]
    assert [hit.signals for hit in beside.results] == [hit.signals for hit in here.results]
    assert [hit.signals["graph"] for hit in beside.results] == [1.0, 0.0]


def test_hybrid_search_beats_vector_only_on_a_date_and_a_rare_word(user, character, scripted):
    wreck = remember(
        scripted, user, "On 14 March 1892 the Albatross sank off Skerryvore.", unit(0, 1), character=character
    )
    storm = remember(scripted, user, "A ship went down in a storm long ago.", unit(1, 0.1), character=character)
    others = [
        remember(scripted, user, f"A quiet day number {i} at sea.", unit(1, 0.05 * i), character=character)
        for i in range(3)
    ]
    memories_embed_pending(user_id=user.pk)
    query_vector = unit(1, 0.2)
    for query in ("qzx", "What happened in March 1892?", "Skerryvore"):
        scripted.vectors[query] = query_vector

    assert ids(memory_search(user=user, query="qzx"))[0] == storm.pk
    for query in ("What happened in March 1892?", "Skerryvore"):
        outcome = memory_search(user=user, query=query)
        assert outcome.method == "hybrid"
        assert ids(outcome)[0] == wreck.pk, query
    assert len(others) == 3


def test_search_falls_back_to_text_when_the_provider_fails(user, character, scripted):
    named, decoy = _name_and_decoy(scripted, user, character)
    scripted.fail_status = 500

    outcome = memory_search(user=user, query="Who is Corvin?")

    assert outcome.method == "text"
    assert ids(outcome) == [named.pk]
    assert outcome.results[0].signals["vector"] is None and outcome.results[0].signals["text"] > 0
    assert scripted.requests[-1].texts == ["Who is Corvin?"]


def test_search_falls_back_to_text_when_the_ollama_server_is_gone(user, character, start_embedder):
    server = start_embedder()
    embedding_settings_set(user=user, provider="ollama", model="nomic", base_url=server.url)
    memory = remember(server, user, "Corvin relit the lantern.", character=character)
    assert memories_embed_pending(user_id=user.pk) == 1
    server.stop()

    outcome = memory_search(user=user, query="lantern")

    assert outcome.method == "text" and ids(outcome) == [memory.pk]


def test_with_embeddings_switched_off_search_ranks_by_text(user, character, scripted):
    memory = remember(scripted, user, "Corvin relit the lantern.", character=character)
    embedding_settings_set(user=user, provider="none")
    outcome = memory_search(user=user, query="Corvin")
    assert outcome.method == "text" and ids(outcome) == [memory.pk]
    assert scripted.requests == []


def test_search_embeds_only_its_own_query_and_at_most_five_sentences(user, character, scripted):
    waiting = remember(scripted, user, "Nobody embedded me yet.", character=character)
    query = (
        "One. Two two. Three three three! Four four four four? Five five five five five. Six six six six six six. Hi!"
    )

    memory_search(user=user, query=query)

    [request] = scripted.requests
    assert request.texts == [
        "Two two.",
        "Three three three!",
        "Four four four four?",
        "Five five five five five.",
        "Six six six six six six.",
    ]
    assert Memory.objects.get(pk=waiting.pk).embedding is None


def test_until_re_embedded_vectors_of_another_model_are_never_compared(user, character, scripted):
    memory = remember(scripted, user, "Boats rest in the harbour.", unit(0, 1), character=character)
    memories_embed_pending(user_id=user.pk)
    scripted.vectors["qzx"] = unit(0, 1)  # the same vector, whichever model asks
    assert ids(memory_search(user=user, query="qzx")) == [memory.pk]

    embedding_settings_set(user=user, provider="openai", model="second", base_url=f"{scripted.url}/v1")
    assert memory_search(user=user, query="qzx").results == []
    # Text still finds it meanwhile, without a vector signal.
    [hit] = memory_search(user=user, query="harbour").results
    assert hit.memory.pk == memory.pk and hit.signals["vector"] is None

    memories_embed_pending(user_id=user.pk)
    [hit] = memory_search(user=user, query="qzx").results
    assert hit.memory.pk == memory.pk and hit.signals["vector"] == pytest.approx(1.0)


def test_controlled_vectors_of_an_indexed_dimension_rank_through_the_hnsw_index(
    user, character, start_embedder, settings
):
    # Past the exact-scan size, whatever the scope's share of the table.
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "exact_max": 0, "hnsw_min_share": 0}
    server = start_embedder(dim=384)
    embedding_settings_set(user=user, provider="openai", model="wide", base_url=f"{server.url}/v1")
    far = remember(server, user, "Far away.", unit(1, 0.3, dim=384), character=character)  # similarity 0.29
    near = remember(server, user, "Close by.", unit(0.1, 1, dim=384), character=character)
    memories_embed_pending(user_id=user.pk)
    assert Memory.objects.get(pk=near.pk).embedding_dim == 384
    server.vectors["qzx"] = unit(0, 1, dim=384)

    assert ids(memory_search(user=user, query="qzx")) == [near.pk, far.pk]


def test_exact_and_hnsw_knn_agree_on_a_small_scope(user, character, start_embedder, settings):
    server = start_embedder(dim=384)
    embedding_settings_set(user=user, provider="openai", model="wide", base_url=f"{server.url}/v1")
    for i in range(12):
        remember(server, user, f"Memory {i}.", unit(1, i / 4, dim=384), character=character)
    memories_embed_pending(user_id=user.pk)
    server.vectors["qzx"] = unit(1, 1, dim=384)
    exact = ids(memory_search(user=user, query="qzx", limit=5))
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "exact_max": 0, "hnsw_min_share": 0}
    assert ids(memory_search(user=user, query="qzx", limit=5)) == exact


def _harbour_days(scripted, user, character, count: int) -> list[Memory]:
    embedding_settings_set(user=user, provider="none")
    return [
        remember(scripted, user, f"A quiet day at the harbour, the {i}th of its kind.", character=character)
        for i in range(count)
    ]


def test_text_search_on_a_scope_past_the_sample_ranks_the_rows_holding_the_rare_words(
    user, character, scripted, settings
):
    days = _harbour_days(scripted, user, character, 30)
    # Every row holds the common words, so the sample estimates them exactly whichever rows it reads first.
    sail = remember(scripted, user, "Corvin sailed from the quiet harbour at dawn.", character=character)
    bell = remember(scripted, user, "The quiet harbour bell rang for Corvin.", character=character)
    query = "When did Corvin leave the quiet harbour?"
    exact = memory_search(user=user, query=query, limit=40)
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "text_sample": 8, "text_budget": 4}

    sampled = memory_search(user=user, query=query, limit=40)

    # Exactly counted, every row sharing a word is a candidate; the rare name ranks its two rows first either way.
    assert set(ids(exact)) == {sail.pk, bell.pk, *(day.pk for day in days)}
    assert set(ids(exact)[:2]) == set(ids(sampled)) == {sail.pk, bell.pk}
    # The name's frequency is counted over the candidates, so its weight is the exact one; the common words'
    # weights are estimated from the sample, where all of them are.
    for pk in (sail.pk, bell.pk):
        assert hits(sampled)[pk].signals["text"] == pytest.approx(hits(exact)[pk].signals["text"], rel=0.02)


def test_text_search_whose_sample_holds_the_rare_rows_still_ranks_them(user, character, scripted, settings):
    # The sample is the first rows the scan reads; here those are the two holding the name, so the name looks
    # common there, and the query's word no row holds ("leave") looks rarer.
    embedding_settings_set(user=user, provider="none")
    sail = remember(scripted, user, "Corvin sailed from the harbour at dawn.", character=character)
    bell = remember(scripted, user, "The harbour bell rang for Corvin.", character=character)
    _harbour_days(scripted, user, character, 30)
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "text_sample": 8, "text_budget": 4}

    sampled = memory_search(user=user, query="When did Corvin leave the quiet harbour?", limit=40)

    # A word the sample never saw costs the budget nothing it can spend: the rarest word seen is ranked too.
    assert set(ids(sampled)[:2]) == {sail.pk, bell.pk}


def test_text_search_past_the_sample_with_only_common_words_still_answers(user, character, scripted, settings):
    days = _harbour_days(scripted, user, character, 30)
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "text_sample": 8, "text_budget": 4}

    outcome = memory_search(user=user, query="the quiet harbour", limit=10)

    # The budget is smaller than any one word's rows; the rarest word still selects (its rows, capped at twice it).
    assert outcome.method == "text" and len(outcome.results) == 8
    assert set(ids(outcome)) <= {day.pk for day in days}


def test_a_scope_past_the_count_cap_is_sized_by_the_planner(
    user, other_user, character, scripted, settings, monkeypatch
):
    from django.db import connection

    from apps.memories.search import candidates

    _harbour_days(scripted, user, character, 40)
    remember(scripted, other_user, "Someone else's day.", character=CharacterFactory(user=other_user))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    scope = candidates.Scope(user=user, character_id=None, chat_id=None, kinds=None, include_retired=False)
    assert candidates.scope_size(scope) == 40  # counted

    monkeypatch.setattr(candidates, "SCOPE_CAP", 10)
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "exact_max": 5}

    # The count stops at 11; the planner's estimate (from ANALYZE's statistics) takes over.
    assert 30 <= candidates.scope_size(scope) <= 50


@pytest.mark.parametrize("sample", [1000, 4])
def test_a_query_of_more_words_than_are_ranked_is_searched_on_either_path(user, character, scripted, settings, sample):
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "text_sample": sample, "text_budget": 4}
    words = [f"word{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(40)]
    embedding_settings_set(user=user, provider="none")
    memories = [remember(scripted, user, " ".join(words[i : i + 8]), character=character) for i in range(0, 40, 4)]

    outcome = memory_search(user=user, query=" ".join(words), limit=20)

    # Only the first 32 words count: the last memories hold none of them.
    assert outcome.method == "text" and outcome.results
    assert memories[-1].pk not in ids(outcome) and all(hit.signals["text"] > 0 for hit in outcome.results)


def test_the_word_index_answers_a_users_words_from_that_users_rows_only(user, other_user, character, scripted):
    from django.db import connection

    from apps.memories.search import candidates

    mine = [remember(scripted, user, f"The lantern was lit on day {i}.", character=character) for i in range(3)]
    theirs = CharacterFactory(user=other_user)
    for i in range(60):
        remember(scripted, other_user, f"Another lantern, number {i}.", character=theirs)
    scope = candidates.Scope(user=user, character_id=None, chat_id=None, kinds=None, include_retired=False)

    assert set(candidates.text_candidates(scope, query="Who lit the lantern?", k=10, size=3)) == {m.pk for m in mine}
    # The text ranking's condition alone, as the index serves it: the owner is one more word of each row (migration
    # 0009), so the 60 rows of the other user holding the word are never read. (Were OWN_WORDS and the index's
    # expression to differ, the index could not serve it at all.)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            f"EXPLAIN (ANALYZE, FORMAT JSON) SELECT m.id FROM memories_memory m WHERE {candidates.OWN_WORDS} @@ %s",
            [f"{candidates.owner_word(user.pk)} & 'lantern'"],
        )
        plan = json.dumps(cursor.fetchone()[0])
    assert re.search(r'"Index Name": "memory_own_words_gin"[^}]*"Actual Rows": 3\.0', plan), plan


def test_a_scope_that_is_a_small_share_of_the_table_is_scanned_exactly_past_exact_max(
    user, other_user, character, scripted, settings
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    mine = remember(scripted, user, "Mine.", unit(1, 0), character=character)
    theirs = CharacterFactory(user=other_user)
    for i in range(19):
        remember(scripted, other_user, f"Theirs {i}.", unit(0, 1), character=theirs)
    memories_embed_pending(user_id=user.pk)
    memories_embed_pending(user_id=other_user.pk)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    scripted.vectors["qzx"] = unit(1, 0.1)

    def knn_statement(share: float) -> str:
        settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "exact_max": 0, "hnsw_min_share": share}
        with CaptureQueriesContext(connection) as queries:
            assert ids(memory_search(user=user, query="qzx")) == [mine.pk]
        return next(q["sql"] for q in queries.captured_queries if "<=>" in q["sql"])

    assert "LEAST(" in knn_statement(0.1)  # 1 row of 20: exact
    assert "LEAST(" not in knn_statement(0.01)  # past both limits: HNSW


def test_the_local_model_recalls_the_turn_that_answers_a_paraphrased_question(
    user, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_import(
            user=user,
            stream=jsonl(
                ("Mira", "My brother Tomas works as a blacksmith in the valley."),
                ("You", "The weather is lovely today."),
                ("Mira", "I planted tulips in the garden last spring."),
                ("You", "Let's go fishing tomorrow."),
            ),
        )
    assert {(m.embedding_model, m.embedding_dim) for m in message_memories(chat)} == {("local:all-MiniLM-L6-v2", 384)}
    outcome = memory_search(user=user, query="What does her sibling do for a living?", chat_id=chat.pk)
    assert outcome.method in ("vector", "hybrid")
    assert outcome.results[0].memory.message_index == 0


# ---------------------------------------------------------------------------------------------------- filters


def test_retired_memories_are_left_out_unless_asked_for(user, character, scripted):
    red = remember(scripted, user, "The gate was painted red.", character=character)
    blue = remember(scripted, user, "The gate was painted blue.", character=character)
    memories_embed_pending(user_id=user.pk)
    memory_retire(memory=red)

    assert ids(memory_search(user=user, query="gate painted")) == [blue.pk]
    assert sorted(ids(memory_search(user=user, query="gate painted", include_retired=True))) == [red.pk, blue.pk]


def test_the_browsers_status_and_entity_filters_narrow_before_the_limit_and_keep_the_scores(user, character, scripted):
    """The memory browser's filters go to memory_search (`status`, `entity_id`): the matching results among all it
    scored, not among the first `limit`, each scored as in the unfiltered search."""
    for coat in ("first", "second"):
        remember(scripted, user, f"The gate was painted red, the {coat} coat.", character=character)
    retired = remember(scripted, user, "The gate was painted once.", character=character)
    linked = memory_create(
        user=user,
        character=character,
        kind="fact",
        content="Corvin painted the gate.",
        entities=[{"name": "Corvin", "type": "person"}],
    )
    memories_embed_pending(user_id=user.pk)
    memory_retire(memory=retired)
    corvin = linked.entities.get()
    query = "Was the gate painted red?"
    everything = memory_search(user=user, query=query, include_retired=True)
    assert ids(everything)[0] not in (retired.pk, linked.pk)

    only_retired = memory_search(user=user, query=query, include_retired=True, status="retired", limit=1)
    assert ids(only_retired) == [retired.pk]
    assert hits(only_retired)[retired.pk].score == hits(everything)[retired.pk].score
    active = memory_search(user=user, query=query)
    only_linked = memory_search(user=user, query=query, entity_id=corvin.pk, limit=1)
    assert ids(only_linked) == [linked.pk]
    assert hits(only_linked)[linked.pk].score == hits(active)[linked.pk].score


def test_kinds_filter_keeps_only_those_kinds(user, character, scripted, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_import(user=user, stream=jsonl(("Mira", "The gate creaks.")), character_ids=[character.pk])
        fact = remember(scripted, user, "The gate is iron.", character=character)
        event = remember(scripted, user, "The gate fell down.", character=character, kind="event")

    assert sorted(ids(memory_search(user=user, query="gate"))) == sorted(
        [fact.pk, event.pk, message_memories(chat)[0].pk]
    )
    assert ids(memory_search(user=user, query="gate", kinds=["event"])) == [event.pk]
    assert sorted(ids(memory_search(user=user, query="gate", kinds=["fact", "event"]))) == [fact.pk, event.pk]
    assert ids(memory_search(user=user, query="gate", kinds=["message"])) == [message_memories(chat)[0].pk]


def test_min_score_drops_the_weaker_results(user, character, scripted):
    remember(scripted, user, "Apples grow in the orchard.", unit(1, 0.3), character=character)
    boats = remember(scripted, user, "Boats rest in the harbour.", unit(0, 1), character=character)
    memories_embed_pending(user_id=user.pk)
    scripted.vectors["qzx"] = unit(0, 1)
    first, second = memory_search(user=user, query="qzx").results

    threshold = (first.score + second.score) / 2
    assert ids(memory_search(user=user, query="qzx", min_score=threshold)) == [boats.pk]
    assert memory_search(user=user, query="qzx", min_score=first.score + 0.01).results == []


def test_a_long_memory_is_excerpted_around_the_part_that_matches(user, character, scripted):
    filler = "The sea was grey and the wind was cold. " * 45
    key = "The silver key is hidden under the third stair."
    long = remember(scripted, user, filler + key + " " + filler.strip(), character=character)
    short = remember(scripted, user, "A silver key opens the lighthouse.", character=character)

    found = hits(memory_search(user=user, query="Where is the silver key hidden?"))

    excerpt = found[long.pk].excerpt
    assert len(long.content) > 3500
    assert key in excerpt and len(excerpt) <= 2002
    assert excerpt.startswith("…") and excerpt.endswith("…")
    assert found[short.pk].excerpt == short.content


# --------------------------------------------------------------------------------------------- extra signals


def test_a_memory_linked_to_an_entity_named_in_the_query_gets_the_graph_boost(user, character, scripted):
    plain = remember(scripted, user, "Someone left the gate open.", character=character)
    linked = memory_create(
        user=user,
        character=character,
        kind="fact",
        content="Someone left the gate open.",
        entities=[{"name": "Corvin", "type": "person", "aliases": ["the old keeper"]}],
    )
    memories_embed_pending(user_id=user.pk)

    # Otherwise equal: with no entity named, the older one comes first.
    assert ids(memory_search(user=user, query="Did someone leave the gate open?")) == [plain.pk, linked.pk]
    for query in ("Did Corvin leave the gate open?", "Did the old keeper leave the gate open?"):
        outcome = memory_search(user=user, query=query)
        assert ids(outcome) == [linked.pk, plain.pk], query
        assert [hit.signals["graph"] for hit in outcome.results] == [1.0, 0.0]


def test_an_entity_whose_name_is_not_a_single_word_still_gets_the_graph_boost(user, character, scripted):
    remember(scripted, user, "Someone fixed the lamp.", character=character)
    linked = memory_create(
        user=user,
        character=character,
        kind="fact",
        content="Someone fixed the lamp.",
        entities=[{"name": "Jean-Luc"}, {"name": "O'Brien"}],
    )
    memories_embed_pending(user_id=user.pk)
    for query in ("Did Jean-Luc fix the lamp?", "Did O'Brien fix the lamp?"):
        outcome = memory_search(user=user, query=query)
        assert hits(outcome)[linked.pk].signals["graph"] == 1.0, query
        assert ids(outcome)[0] == linked.pk, query


def test_a_memory_from_the_asking_instance_outranks_an_equal_one(user, character, scripted):
    here = remember(scripted, user, "The bell rang twice.", character=character)
    there = remember(scripted, user, "The bell rang twice.", character=character, source_instance="phone")
    memories_embed_pending(user_id=user.pk)

    assert ids(memory_search(user=user, query="bell")) == [here.pk, there.pk]
    outcome = memory_search(user=user, query="bell", instance="phone")
    assert ids(outcome) == [there.pk, here.pk]
    assert [hit.signals["instance"] for hit in outcome.results] == [1.0, 0.0]

    Memory.objects.filter(pk=here.pk).update(participating_instances=["tablet"])
    assert ids(memory_search(user=user, query="bell", instance="tablet")) == [here.pk, there.pk]


# ---------------------------------------------------------------------------------------------------- tenancy


def test_another_users_memories_never_appear_even_with_identical_text_and_vector(user, other_user, scripted):
    mine = remember(scripted, user, "The password is swordfish.", unit(0, 1), character=CharacterFactory(user=user))
    theirs = remember(
        scripted, other_user, "The password is swordfish.", character=CharacterFactory(user=other_user, name="Mira")
    )
    memories_embed_pending(user_id=user.pk)
    memories_embed_pending(user_id=other_user.pk)
    scripted.vectors["qzx"] = unit(0, 1)

    for query in ("swordfish", "qzx", "The password is swordfish."):
        assert ids(memory_search(user=user, query=query)) == [mine.pk], query
        assert ids(memory_search(user=other_user, query=query)) == [theirs.pk], query


@pytest.mark.parametrize(
    "fields",
    [HIT_FIELDS, ("kind", "content", "message_index"), ["kind", "status"], ("content", "data"), None],
    ids=str,
)
def test_a_hits_memory_holds_what_the_orm_reads_of_it_whatever_fields_are_asked(
    user, other_user, character, scripted, django_assert_num_queries, fields
):
    """Hits are read by a written statement when no asked field is converted on reading; a JSON field is, and goes
    through the ORM. Either way the memory is the one stored, and reading an asked field asks no query."""
    mine = remember(
        scripted, user, "Mira keeps the brass key.", unit(0, 1), character=character, importance=3, confidence=0.9,
        source_message_indices=[3, 5], data={"state": "kept"}, occurred_at=datetime(2024, 5, 1, 9, 30, tzinfo=UTC),
    )  # fmt: skip
    remember(scripted, other_user, "Mira keeps the brass key.", character=CharacterFactory(user=other_user))
    memories_embed_pending(user_id=user.pk)
    scripted.vectors["brass key"] = unit(0, 1)

    [hit] = memory_search(user=user, query="brass key", fields=fields).results

    stored = Memory.objects.get(pk=mine.pk)
    loaded = [f.attname for f in Memory._meta.concrete_fields if f.attname not in hit.memory.get_deferred_fields()]
    assert {Memory._meta.get_field(name).attname for name in fields or ()} <= set(loaded)
    with django_assert_num_queries(0):
        assert {name: getattr(hit.memory, name) for name in loaded} == {name: getattr(stored, name) for name in loaded}
    assert "embedding" not in loaded


def test_a_chat_scoped_search_never_returns_another_chats_memories_but_shares_the_characters(
    user, character, scripted, django_capture_on_commit_callbacks, settings
):
    # Every memory in scope a match by meaning, however far: then only the scope keeps other chats' memories out.
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "min_similarity": -1.0}
    stranger = CharacterFactory(user=user, name="Stranger")
    with django_capture_on_commit_callbacks(execute=True):
        chat_a = chat_import(
            user=user, stream=jsonl(("Mira", "The harbour smells of tar.")), character_ids=[character.pk]
        )
        chat_b = chat_import(user=user, stream=jsonl(("Mira", "The forest is quiet.")), character_ids=[character.pk])
        summary_a = remember(scripted, user, "The harbour burned.", chat=chat_a, kind="summary")
        detail_a = remember(scripted, user, "Tar on the harbour stones.", chat=chat_a, character=character)
        fact = remember(scripted, user, "Mira fears the harbour.", character=character)
        remember(scripted, user, "The stranger loves the harbour.", character=stranger)
    message_a, message_b = message_memories(chat_a)[0], message_memories(chat_b)[0]
    of_a = {summary_a.pk, detail_a.pk, message_a.pk}

    # Vector search returns every memory in scope, so the scope is all that keeps chat A's memories out of B's.
    assert set(ids(memory_search(user=user, query="harbour", chat_id=chat_b.pk))) == {fact.pk, message_b.pk}
    assert set(ids(memory_search(user=user, query="harbour", chat_id=chat_a.pk))) == {*of_a, fact.pk}
    assert set(ids(memory_search(user=user, query="harbour", character_id=character.pk))) == {
        *of_a,
        fact.pk,
        message_b.pk,
    }
    embedding_settings_set(user=user, provider="none")
    assert ids(memory_search(user=user, query="harbour", chat_id=chat_b.pk)) == [fact.pk]


def test_a_chat_without_characters_can_be_searched(user, scripted, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_create(user=user, title="Alone")
        message_append(chat=chat, data={"name": "You", "is_user": True, "mes": "Talking to the walls."})
    outcome = memory_search(user=user, query="walls", chat_id=chat.pk)
    assert ids(outcome) == [message_memories(chat)[0].pk]


def test_a_query_holding_a_url_with_an_apostrophe_is_searched(user, character, scripted):
    memory = remember(scripted, user, "Her notes are at http://example.org/it's-here for anyone.", character=character)
    memories_embed_pending(user_id=user.pk)
    outcome = memory_search(user=user, query="http://example.org/it's-here")
    assert ids(outcome) == [memory.pk]


def test_a_query_nothing_matches_answers_nothing_with_the_local_model(user, character):
    """The deployment's own embeddings (all-MiniLM-L6-v2): a string of no language comes close to no memory, and
    shares no word with any, so it answers no result; a real question finds its memory, relevance near the top."""
    for content in (
        "Mira relit the lantern at the harbour before dawn.",
        "Rowan owes the guild eleven crowns.",
        "The Gull came in with torn sails after the storm.",
    ):
        memory_create(user=user, character=character, kind="fact", content=content)
    memories_embed_pending(user_id=user.pk)

    assert memory_search(user=user, query="zzzzqqq").results == []
    assert memory_search(user=user, query="qwpoeiru mnbvcxz").results == []
    found = memory_search(user=user, query="Who relit the lantern?").results
    # Every word of the question (words 1) and close in meaning (similarity 0.63: meaning 0.48).
    assert "lantern" in found[0].memory.content and found[0].relevance > 0.7
