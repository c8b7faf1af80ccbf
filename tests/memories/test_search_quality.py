"""memory_search's ranking as tuned on LoCoMo (docs/SEARCH.md): relevance fused from the values of words and
meaning, half of the neighbouring turn's relevance, the speaker and time signals, and meaning only for a query the
local model reads a word of. bench/locomo_recall.py measures what each is worth."""

from datetime import UTC, date, datetime

import pytest

from apps.chats.services.chats import chat_import
from apps.memories.embeddings import EmbeddingConfig, deployment_config, reads_words
from apps.memories.models import Memory
from apps.memories.search import memory_search
from apps.memories.search.dates import Period, query_periods, within
from apps.memories.services.indexing import memories_embed_pending
from apps.memories.services.memories import memory_create
from apps.memories.services.settings import embedding_settings_set
from tests.memories.helpers import jsonl, message_memories, unit

pytestmark = pytest.mark.django_db


def remember(server, user, content, vector=None, *, character, **fields) -> Memory:
    if vector is not None:
        server.vectors[content] = vector
    return memory_create(user=user, character=character, kind="fact", content=content, **fields)


def hits(outcome) -> dict:
    return {hit.memory.pk: hit for hit in outcome.results}


def ids(outcome) -> list[int]:
    return [hit.memory.pk for hit in outcome.results]


def imported(user, capture, *messages):
    with capture(execute=True):
        chat = chat_import(user=user, stream=jsonl(*messages, character_name="Tomas"))
    return chat, message_memories(chat)


# ------------------------------------------------------------------------------------------------- relevance


def test_relevance_is_the_weighted_mean_of_the_words_held_and_the_meaning(user, character, scripted):
    both = remember(scripted, user, "Corvin relit the lantern.", unit(1, 0), character=character)
    word = remember(scripted, user, "The lantern was cold.", unit(0, 1), character=character)
    memories_embed_pending(user_id=user.pk)
    scripted.vectors["Corvin lantern"] = unit(1, 0)

    found = hits(memory_search(user=user, query="Corvin lantern"))

    # Every word and the same meaning: 1. One word of two, by its weight (IDF over the two memories: "lantern" is in
    # both, "corvin" in one), and no meaning (similarity 0, under the floor): half of that share.
    assert found[both.pk].relevance == pytest.approx(1.0, abs=1e-3)
    idf_corvin, idf_lantern = 0.693147, 0.182322
    assert found[word.pk].relevance == pytest.approx(idf_lantern / (idf_corvin + idf_lantern) / 2, abs=2e-3)
    assert found[word.pk].signals["vector"] is None


def test_a_memorys_relevance_does_not_depend_on_what_else_the_query_found(user, character, scripted):
    first = remember(scripted, user, "The lantern was cold.", unit(1, 0.5), character=character)
    memories_embed_pending(user_id=user.pk)
    scripted.vectors["lantern"] = unit(1, 0)
    alone = hits(memory_search(user=user, query="lantern"))[first.pk].relevance

    remember(scripted, user, "Corvin relit the lantern.", unit(1, 0), character=character)  # nearer in meaning
    memories_embed_pending(user_id=user.pk)
    outcome = memory_search(user=user, query="lantern")

    assert ids(outcome)[1] == first.pk  # no longer first ...
    assert hits(outcome)[first.pk].relevance == pytest.approx(alone, abs=1e-6)  # ... and as relevant as before


def test_a_word_the_scope_does_not_hold_lowers_no_ones_share_exact_or_sampled(user, character, scripted, settings):
    embedding_settings_set(user=user, provider="none")
    named = remember(scripted, user, "Corvin relit the lantern at the harbour.", character=character)
    days = [
        remember(scripted, user, f"A quiet day at the harbour, the {i}th.", character=character) for i in range(12)
    ]

    for sample in (1000, 8):  # the whole scope counted, then frequencies estimated from 8 rows
        settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "text_sample": sample, "text_budget": 4}
        outcome = memory_search(user=user, query="Corvin harbour zebra")
        assert outcome.method == "text" and ids(outcome)[0] == named.pk, sample
        # With no vector the words alone make relevance: all the words the scope holds ("zebra" it does not).
        assert hits(outcome)[named.pk].relevance == pytest.approx(1.0, abs=1e-3), sample
        assert all(hits(outcome)[day.pk].relevance < 0.2 for day in days if day.pk in hits(outcome)), sample


# --------------------------------------------------------------------------------------------- neighbour turns


def test_the_turn_after_a_matching_one_gains_half_its_relevance(user, scripted, django_capture_on_commit_callbacks):
    question, answer, other = "Where is the brass key hidden?", "Under the third stair.", "The tea is cold."
    scripted.vectors |= {f"You: {question}": unit(1, 0), f"Tomas: {answer}": unit(0, 1), f"You: {other}": unit(0, 1)}
    scripted.vectors["brass key"] = unit(1, 0)
    chat, (asked, answered, unrelated) = imported(
        user, django_capture_on_commit_callbacks, ("You", question), ("Tomas", answer), ("You", other)
    )

    outcome = memory_search(user=user, query="brass key", chat_id=chat.pk)

    assert ids(outcome) == [asked.pk, answered.pk]  # the turn after the answer's is not a neighbour of a match
    found = hits(outcome)
    assert found[asked.pk].relevance == pytest.approx(1.0, abs=1e-3)
    # No word in common and nothing of its meaning: half its neighbour's relevance.
    assert found[answered.pk].signals["text"] is None and found[answered.pk].signals["vector"] is None
    assert found[answered.pk].relevance == pytest.approx(0.5, abs=1e-3)
    assert unrelated.pk not in found


def test_turns_left_out_of_a_search_are_neither_candidates_nor_neighbours(
    user, scripted, django_capture_on_commit_callbacks
):
    """A reply's recall leaves out the turns its prompt holds (`turns_from`): one matching is not found, and the
    turn after a match, when left out, gains nothing from it either."""
    turns = [("You", "Where is the brass key hidden?"), ("Tomas", "Under the third stair."),
             ("You", "And the brass key's twin?")]  # fmt: skip
    chat, (asked, answered, again) = imported(user, django_capture_on_commit_callbacks, *turns)

    assert set(ids(memory_search(user=user, query="brass key", chat_id=chat.pk))) == {asked.pk, answered.pk, again.pk}
    assert ids(memory_search(user=user, query="brass key", chat_id=chat.pk, turns_from=1)) == [asked.pk]
    for kinds in (None, ["message"]):
        assert ids(memory_search(user=user, query="brass key", chat_id=chat.pk, kinds=kinds, turns_from=0)) == []


# -------------------------------------------------------------------------------------------------- speaker


def test_a_turn_spoken_by_someone_the_query_names_gets_the_speaker_signal(
    user, scripted, django_capture_on_commit_callbacks
):
    chat, (mira, tomas, mention, you) = imported(
        user,
        django_capture_on_commit_callbacks,
        ("Mira", "I found a brass key in the cellar."),
        ("Tomas", "I found a brass key in the attic."),
        ("Tomas", "Mira found a brass key too."),
        ("You", "I found a brass key as well."),
    )

    found = hits(memory_search(user=user, query="Where did Mira find the brass key?", chat_id=chat.pk))

    assert found[mira.pk].signals["speaker"] == 1.0
    # Naming Mira in a turn is not speaking it; Tomas is not named.
    assert found[mention.pk].signals["speaker"] == 0.0 and found[tomas.pk].signals["speaker"] == 0.0
    assert found[mira.pk].score - found[tomas.pk].score > 0.1 - 1e-6
    # A speaker called "You" is not named by every question asking "you".
    asked = hits(memory_search(user=user, query="Where did you find the brass key?", chat_id=chat.pk))
    assert asked[you.pk].signals["speaker"] == 0.0


# ------------------------------------------------------------------------------------------------------ time


def test_a_memory_from_a_time_the_query_names_gets_the_time_signal(user, character, scripted):
    def flooded(day: date | None) -> Memory:
        moment = datetime(day.year, day.month, day.day, 12, tzinfo=UTC) if day else None
        return remember(scripted, user, "The harbour flooded.", character=character, occurred_at=moment)

    # The older first, so that without the signal the undated and the July memories would lead (ties keep age order).
    undated, july = flooded(None), flooded(date(2023, 7, 2))
    told_after = flooded(date(2023, 6, 5))  # a message a few days after the month, telling of it
    may = flooded(date(2023, 5, 10))
    memories_embed_pending(user_id=user.pk)

    outcome = memory_search(user=user, query="When was the harbour flooded in May 2023?")

    found = hits(outcome)
    assert [found[m.pk].signals["time"] for m in (may, told_after, july, undated)] == [1.0, 1.0, 0.0, 0.0]
    assert set(ids(outcome)[:2]) == {may.pk, told_after.pk}
    on_a_day = hits(memory_search(user=user, query="Was the harbour flooded on 3 June, 2023?"))
    assert [on_a_day[m.pk].signals["time"] for m in (may, told_after, july)] == [0.0, 1.0, 0.0]


def test_the_dates_a_query_names():
    def periods(query):
        return query_periods(query, slack_days=7)

    week = (date(2022, 10, 9), date(2022, 10, 16))
    for query in ("What did Nate play on 9 October, 2022?", "on October 9, 2022", "on the 9th of Oct. 2022"):
        assert periods(query) == [Period(*week)], query
    assert periods("in May 2023") == [Period(date(2023, 5, 1), date(2023, 6, 7))]
    assert periods("during 2022") == [Period(date(2022, 1, 1), date(2023, 1, 7))]
    assert periods("camping in June") == [Period(month=6)]
    assert periods("She may come by soon") == [] and periods("on 31 February, 2023") == []
    june = [Period(month=6)]
    assert within(datetime(2021, 6, 30, tzinfo=UTC), june, slack_days=7)
    assert within(datetime(2023, 7, 3, tzinfo=UTC), june, slack_days=7)
    assert not within(datetime(2023, 7, 9, tzinfo=UTC), june, slack_days=7)


# ---------------------------------------------------------------------------------------- a query of no words


def test_the_local_model_reads_a_word_of_a_question_and_none_of_a_string_of_no_language():
    local = deployment_config()
    assert local.provider == "local"
    assert reads_words(local, "What does her sibling do for a living?")
    for text in ("zzzzqqq", "asdfgh jklz", "qwpoeiru mnbvcxz", "ok", "Skerryvore"):
        assert not reads_words(local, text), text
    remote = EmbeddingConfig(provider="openai", model="any")
    assert reads_words(remote, "zzzzqqq")  # its vocabulary is not known here


def test_a_string_of_no_language_is_searched_by_its_words_alone(user, settings, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_import(
            user=user,
            stream=jsonl(("Mira", "Thanks for asking! Losing my job was hard, but I'm living my dreams now.")),
        )

    outcome = memory_search(user=user, query="zzzzqqq", chat_id=chat.pk)
    assert outcome.method == "text" and outcome.results == []

    settings.LOREKEEPER_SEARCH = {
        **settings.LOREKEEPER_SEARCH,
        "meaning_needs_a_known_word": False,
        "min_similarity_by_model": {},
        "min_similarity": -1.0,
    }
    assert memory_search(user=user, query="zzzzqqq", chat_id=chat.pk).method == "vector"


def test_a_turn_next_to_matches_worth_nothing_is_left_out_not_a_crash(
    user, scripted, settings, django_capture_on_commit_callbacks
):
    # The words weigh nothing and there are no vectors: every match has relevance 0, so its neighbours gain nothing.
    settings.LOREKEEPER_SEARCH = {**settings.LOREKEEPER_SEARCH, "fusion": {"method": "score", "vector": 1, "text": 0}}
    embedding_settings_set(user=user, provider="none")
    chat, (lantern, after) = imported(
        user, django_capture_on_commit_callbacks, ("You", "The lantern went out."), ("Tomas", "I will fetch a match.")
    )

    outcome = memory_search(user=user, query="lantern", chat_id=chat.pk)

    assert ids(outcome) == [lantern.pk] and outcome.results[0].relevance == 0.0
    assert after.pk not in ids(outcome)
