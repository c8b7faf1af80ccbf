"""Triggered recall and persistent recall (ST-BME's `extra.bme_recall` on the user turn, docs/GLOSSARY.md): the
priority rules, what the record holds, and a person's edit, deletion and re-run."""

import re
import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from apps.accounts.services import settings_document_get
from apps.chats.models import Chat, Message
from apps.common.exceptions import ApplicationError
from apps.injection.services import context as context_module
from apps.injection.services.context import context_build
from apps.injection.services.recall import recall_edit, recall_rerun, recall_store, recall_stored, recall_subgraph
from apps.injection.services.settings import injection_settings_save
from apps.memories.models import Memory
from apps.memories.services.indexing import chat_index_messages, memories_embed_pending
from apps.memories.services.memories import memory_create
from tests.chats.factories import CharacterFactory
from tests.injection.helpers import ASK, DOG, say
from tests.memories.helpers import hits_read

pytestmark = pytest.mark.django_db


def last_user(chat) -> Message:
    return Message.objects.filter(chat=chat, is_user=True).order_by("-index").first()


def test_a_new_recall_is_made_for_the_pending_message_and_kept_on_its_user_turn(user, story, facts):
    before = Chat.objects.get(pk=story.pk).integrity
    context = context_build(user=user, chat=story, message=ASK)
    slot = context.slots["smart_memory_triggered"]
    assert slot["text"] == f"[Recalled for this turn]\n- {DOG}" and slot["memory_ids"] == [facts["dog"].pk]
    assert context.recall["source"] == "new" and context.recall["stored"] and context.recall["message_index"] == 1
    record = recall_stored(last_user(story))
    assert record["version"] == 1 and record["injectionText"] == slot["text"]
    assert record["selectedNodeIds"] == [f"m{facts['dog'].pk}"] and record["memories"][0]["id"] == facts["dog"].pk
    assert record["recallInput"] == ASK and record["boundUserFloorText"] == ASK and record["authoritativeInputUsed"]
    assert record["manuallyEdited"] is False and record["tokenEstimate"] == slot["tokens"]
    nodes = {node["id"]: node for node in record["subgraph"]["nodes"]}
    dog_entity = facts["dog"].entities.get()
    assert (
        set(nodes) == {f"m{facts['dog'].pk}", f"e{dog_entity.pk}"} and nodes[f"e{dog_entity.pk}"]["label"] == "Biscuit"
    )
    assert record["subgraph"]["edges"] == [
        {"source": f"m{facts['dog'].pk}", "target": f"e{dog_entity.pk}", "kind": "mentions"}
    ]
    current = Chat.objects.get(pk=story.pk).integrity
    assert current != before and context.chat.integrity == current  # the recall is a write: the client gets it


def test_a_regeneration_uses_the_recall_kept_on_the_turn_without_searching(user, story, facts, scripted):
    context_build(user=user, chat=story, message=ASK)
    scripted.forget()
    again = context_build(user=user, chat=story)
    assert again.recall["source"] == "stored"
    assert again.slots["smart_memory_triggered"]["text"] == f"[Recalled for this turn]\n- {DOG}"
    assert scripted.requests == []  # no query embedded: nothing searched


def test_with_neither_a_new_nor_a_kept_recall_the_slot_is_empty(user, story, facts):
    context = context_build(user=user, chat=story)
    assert context.recall["source"] == "none" and context.slots["smart_memory_triggered"]["text"] == ""


def test_a_message_not_in_the_chat_yet_gets_its_recall_in_the_answer_only(user, story, facts):
    context = context_build(user=user, chat=story, message="What of the lighthouse keeper's old dog, then?")
    assert context.recall["source"] == "new" and context.recall["stored"] is False
    assert context.recall["bme_recall"]["injectionText"].endswith(DOG)
    assert recall_stored(last_user(story)) is None


def test_a_preview_keeps_nothing(user, story, facts):
    before = Chat.objects.get(pk=story.pk).integrity
    context = context_build(user=user, chat=story, message=ASK, preview=True)
    assert context.recall["source"] == "new" and not context.recall["stored"]
    assert recall_stored(last_user(story)) is None and Chat.objects.get(pk=story.pk).integrity == before


def test_what_another_slot_injects_is_not_recalled_again(user, story, facts, character, remember):
    important = remember(
        "fact", "The lighthouse keeper guards the old harbour dog kennels.", character=character, importance=3
    )
    context = context_build(user=user, chat=story, message=ASK, preview=True)
    assert important.pk in context.slots["smart_memory_long"]["memory_ids"]
    assert important.pk not in context.slots["smart_memory_triggered"]["memory_ids"]


@pytest.mark.django_db(transaction=True)  # outside a test's transaction work beside runs in a thread of its own
def test_the_slots_are_read_beside_the_recall_search_in_a_replys_transaction(
    user, story, facts, character, remember, monkeypatch
):
    important = remember(
        "fact", "The lighthouse keeper guards the old harbour dog kennels.", character=character, importance=3
    )
    threads: list[str] = []
    real = context_module.gather

    def gather(scope, budgets):
        threads.append(threading.current_thread().name)
        return real(scope, budgets)

    monkeypatch.setattr(context_module, "gather", gather)
    with transaction.atomic():  # as a reply's preparation builds it, after writing the person's message
        context = context_build(user=user, chat=story, message=ASK)
    assert len(threads) == 1 and threads[0].startswith("beside")
    mine = ("smart_memory_triggered", "smart_memory_unified")  # the unified slot holds all the others
    placed = {pk for key, slot in context.slots.items() if key not in mine for pk in slot["memory_ids"]}
    recalled = context.slots["smart_memory_triggered"]["memory_ids"]
    assert important.pk in placed and recalled[0] == facts["dog"].pk and not placed & set(recalled)
    assert recall_stored(last_user(story))["selectedNodeIds"] == [f"m{pk}" for pk in recalled]
    assert set(context.timings_ms) >= {"gather", "embed", "search", "commit", "total"}


def test_an_edited_recall_is_kept_when_the_same_message_is_asked_again_until_re_run(user, story, facts):
    context_build(user=user, chat=story, message=ASK)
    record, chat = recall_edit(chat=story, index=1, text="Biscuit is a grey lurcher.")
    assert record["manuallyEdited"] and record["injectionText"] == "Biscuit is a grey lurcher."
    again = context_build(user=user, chat=chat, message=ASK)
    assert again.recall["source"] == "stored" and again.recall["edited"]
    assert again.slots["smart_memory_triggered"]["text"] == "Biscuit is a grey lurcher."
    record, chat = recall_rerun(user=user, chat=chat, index=1)
    assert not record["manuallyEdited"] and record["injectionText"].endswith(DOG) and record["hookName"] == "rerun"
    assert recall_stored(last_user(chat))["injectionText"] == record["injectionText"]


def test_an_edited_recall_of_a_message_of_several_lines_is_kept_when_it_is_asked_again(user, story, facts):
    asked = "Tell me about\nthe lighthouse keeper's  old dog."
    Message.objects.filter(chat=story, index=1).update(mes=asked)
    context_build(user=user, chat=story, message=asked)
    _, chat = recall_edit(chat=story, index=1, text="Biscuit is a grey lurcher.")
    again = context_build(user=user, chat=chat, message=asked)
    assert again.recall["source"] == "stored" and again.recall["edited"]
    assert again.slots["smart_memory_triggered"]["text"] == "Biscuit is a grey lurcher."


def test_deleting_a_recall_removes_it_from_the_message_and_its_swipe(user, story, facts):
    Message.objects.filter(chat=story, index=1).update(swipes=[ASK], swipe_id=0, swipe_info=[{"extra": {}}])
    context_build(user=user, chat=story, message=ASK)
    message = last_user(story)
    assert message.swipe_info[0]["extra"]["bme_recall"]["injectionText"].endswith(DOG)  # swipe-aware, as set_data
    chat = recall_store(chat=story, index=1, record=None)
    message.refresh_from_db()
    assert "bme_recall" not in message.extra and "bme_recall" not in message.swipe_info[0]["extra"]
    assert chat.integrity == Chat.objects.get(pk=story.pk).integrity


def test_a_recall_belongs_to_a_user_message_and_a_stale_integrity_is_refused(user, story, facts):
    with pytest.raises(ApplicationError):
        recall_rerun(user=user, chat=story, index=0)  # Mira's line
    import uuid

    with pytest.raises(ApplicationError) as conflict:
        recall_rerun(user=user, chat=story, index=1, integrity=uuid.uuid4())
    assert conflict.value.status == 409


def test_older_chat_turns_are_recalled_but_not_those_in_the_prompt_anyway(user, story, character, scripted):
    injection_settings_save(
        user=user, values={"recent_messages": 10}, integrity=settings_document_get(user=user).integrity
    )
    say(story, *[("Mira" if i % 2 == 0 else "Rowan", f"Small talk number {i}.") for i in range(30)])
    Message.objects.filter(chat=story, index=3).update(mes="Biscuit the lurcher sleeps under the lighthouse stairs.")
    Message.objects.filter(chat=story, index=27).update(mes="Biscuit the lurcher barked at the lighthouse door.")
    say(story, ("Rowan", "Where does Biscuit the lurcher sleep?"))
    chat_index_messages(chat_id=story.pk)
    memories_embed_pending(user_id=user.pk)
    context = context_build(user=user, chat=story, message="Where does Biscuit the lurcher sleep?", preview=True)
    text = context.slots["smart_memory_triggered"]["text"]
    assert "Rowan: Biscuit the lurcher sleeps under the lighthouse stairs." in text
    assert "barked at the lighthouse door" not in text  # message #27 is among the last 10


def test_turns_in_the_prompt_anyway_take_no_place_among_the_recalls_hits(user, story, character, scripted):
    """The turns the prompt holds are left out by the search itself: many of them matching better do not fill the
    hits it answers, leaving the older turn the prompt lacks out of the recall."""
    injection_settings_save(
        user=user, values={"recent_messages": 30, "triggered_limit": 1},
        integrity=settings_document_get(user=user).integrity,
    )  # fmt: skip
    say(story, ("Mira", "Biscuit the lurcher sleeps under the lighthouse stairs, by the old lantern."))
    say(story, *[("Mira" if i % 2 == 0 else "Rowan", f"Small talk number {i}.") for i in range(10)])
    say(story, *[("Mira" if i % 2 == 0 else "Rowan", f"Biscuit the lurcher sleeps by the lantern, {i}.")
                 for i in range(29)])  # fmt: skip
    say(story, ("Rowan", "Where does Biscuit the lurcher sleep?"))
    chat_index_messages(chat_id=story.pk)
    memories_embed_pending(user_id=user.pk)
    context = context_build(user=user, chat=story, message="Where does Biscuit the lurcher sleep?", preview=True)
    text = context.slots["smart_memory_triggered"]["text"]
    assert "under the lighthouse stairs" in text  # message #2, not among the last 30
    assert "by the lantern," not in text


def test_the_recall_reads_its_hits_narrow_and_never_one_by_one(user, story, facts, scripted):
    injection_settings_save(
        user=user, values={"recent_messages": 10}, integrity=settings_document_get(user=user).integrity
    )
    say(story, *[("Mira" if i % 2 == 0 else "Rowan", f"Small talk number {i}.") for i in range(30)])
    Message.objects.filter(chat=story, index=3).update(mes="Biscuit the lurcher sleeps under the lighthouse stairs.")
    chat_index_messages(chat_id=story.pk)
    memories_embed_pending(user_id=user.pk)
    with CaptureQueriesContext(connection) as queries:
        context = context_build(user=user, chat=story, message="Where does Biscuit the lurcher sleep?", preview=True)
    recalled = context.recall["memories"]
    assert "message" in {Memory.objects.get(pk=hit["id"]).kind for hit in recalled}  # its index read too
    hits = hits_read(queries)
    assert len(hits) == 1, hits
    read = set(hits[0].split(" FROM ")[0].removeprefix("SELECT ").split(", "))
    assert read == {"id", "kind", "content", "message_index"}, read  # not the vector, nor what the recall never reads
    # A field the recall reads but the search left out would be loaded memory by memory.
    one_by_one = [q["sql"] for q in queries.captured_queries if re.search(r'"memories_memory"\."id" = \d', q["sql"])]
    assert not one_by_one, one_by_one


def test_a_build_reads_its_turn_narrow_and_once_before_writing_its_recall(user, story, facts):
    with CaptureQueriesContext(connection) as queries:
        context = context_build(user=user, chat=story, message=ASK)
    assert context.recall["stored"]
    sql = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    reads = [q for q in sql if 'FROM "chats_message"' in q and '"chats_message"."extra"' in q]
    assert len(reads) == 2, reads  # the turn found, then read again under the chat's lock to write its recall
    assert '"chats_message"."swipes"' not in reads[0] and '"chats_message"."swipe_info"' not in reads[0]


def test_deleting_a_recall_that_is_not_there_changes_nothing(user, story, facts):
    before = Chat.objects.get(pk=story.pk).integrity
    assert recall_store(chat=story, index=1, record=None).integrity == before


def test_the_card_names_the_long_term_memory_in_the_prompt_when_recall_finds_nothing(
    user, story, character, remember, scripted
):
    """A memory in the long-term slot is left out of the turn's recall (it is in the prompt already): the record
    the card reads says it reached the prompt, and through which slot."""
    keeper = remember("fact", "The lighthouse keeper's old dog sleeps by the lamp.", character=character, importance=3)
    say(story, ("Mira", "Welcome back."), ("Rowan", ASK))
    context = context_build(user=user, chat=story, message=ASK)
    assert keeper.pk in context.slots["smart_memory_long"]["memory_ids"]
    assert context.slots["smart_memory_triggered"]["memory_ids"] == []
    assert context.recall["stored"] and context.recall["prompt"][0]["slot"] == "long"
    record = recall_stored(last_user(story))
    assert record["injectionText"] == "" and record["memories"] == []
    assert [(e["slot"], e["label"], e["count"]) for e in record["prompt"]] == [("long", "Long-term", 1)]
    assert record["prompt"][0]["memories"][0]["id"] == keeper.pk
    again = context_build(user=user, chat=Chat.objects.get(pk=story.pk))
    assert not again.recall["stored"]  # the same prompt again: no write


def test_the_subgraph_draws_mentions_supersedes_and_contradictions_of_the_persons_own_memories(
    user, other_user, character, remember
):
    sold = remember("fact", "Mira sold the Gull to Hale. " + "She kept the lantern. " * 5, character=character,
                    entities=[{"name": "Hale", "type": "person"}, {"name": "Gull", "type": "ship"}])  # fmt: skip
    kept = remember("fact", "Mira keeps the Gull.", character=character, entities=[{"name": "Gull", "type": "ship"}])
    owns = remember("fact", "Hale owns nothing.", character=character)
    Memory.objects.filter(pk=kept.pk).update(superseded_by=sold)
    sold.contradicts.add(owns)
    theirs = memory_create(
        user=other_user, kind="fact", content="Not yours.", origin="extraction",
        character=CharacterFactory(user=other_user, name="Mira"),
    )  # fmt: skip
    gull, hale = sold.entities.get(name="Gull"), sold.entities.get(name="Hale")

    graph = recall_subgraph(
        user_id=user.pk, memory_ids=[sold.pk, kept.pk, owns.pk, theirs.pk], scores={sold.pk: 0.9, kept.pk: 0.5}
    )
    assert graph["nodes"] == [
        {"id": f"m{m.pk}", "type": "memory", "memory": m.pk, "kind": "fact", "label": m.content[:80], "score": score}
        for m, score in ((owns, None), (kept, 0.5), (sold, 0.9))
    ] + [
        {"id": f"e{e.pk}", "type": "entity", "entity": e.pk, "kind": e.type, "label": e.name} for e in (gull, hale)
    ]  # newest memory first, then the entities as first met
    assert graph["edges"] == [
        {"source": f"m{kept.pk}", "target": f"e{gull.pk}", "kind": "mentions"},
        {"source": f"m{sold.pk}", "target": f"m{kept.pk}", "kind": "supersedes"},
        {"source": f"m{sold.pk}", "target": f"e{gull.pk}", "kind": "mentions"},
        {"source": f"m{sold.pk}", "target": f"e{hale.pk}", "kind": "mentions"},
        {"source": f"m{sold.pk}", "target": f"m{owns.pk}", "kind": "contradicts"},
    ]
    assert recall_subgraph(user_id=user.pk, memory_ids=[], scores={}) == {"nodes": [], "edges": []}
