"""Orchestration: what the planner queues, how edits of extracted messages are taken back and extracted again,
pause and resume, failures with retries, unreadable answers, and what the runner does with jobs it finds."""

import re
import time
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from apps.chats.services.messages import message_update
from apps.extraction.models import ChatPipeline, PipelineJob
from apps.extraction.services.jobs import job_retry, jobs_prune, pipeline_wake
from apps.extraction.services.pipeline import pipeline_pause, pipeline_rebuild, pipeline_request, pipeline_resume
from apps.extraction.services.runner import chat_run, job_execute
from apps.extraction.services.settings import extraction_settings_set
from apps.extraction.services.sweep import chats_to_run
from apps.llm.models import Call
from apps.memories.models import Decision, Memory
from apps.memories.services.indexing import chat_index_messages
from tests.extraction.helpers import TASKS, add_turns, process
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

BATCH_FACTS = {
    0: "The harbour seal on the ledger is a forgery.",
    10: "Rowan lost his hat in the canal during the chase.",
    20: "A storm wrecked the northern pier at dawn.",
}


def per_batch(prompt: str) -> Reply:
    """A different detail for each batch of ten, so that batches are told apart."""
    first = int(re.search(r"New messages \(#(\d+) to", prompt)[1])
    return Reply(f"[detail:2:scene] {BATCH_FACTS.get(first, f'Nothing new from #{first}.')}")


def details(user, **filters):
    return Memory.objects.filter(user=user, kind="detail", origin="extraction", **filters)


def grow(story, batches: int) -> None:
    """Batches of ten messages, each processed as it arrives (as appends in a live chat are)."""
    for _ in range(batches):
        add_turns(story, 10)
        process(story)


def test_an_edit_near_the_end_takes_back_its_batch_and_extracts_it_again(model, story, user):
    model.server.on(TASKS["session"], per_batch)
    grow(story, 2)
    first, second = details(user).order_by("id")
    assert (first.content, second.content) == (BATCH_FACTS[0], BATCH_FACTS[10])

    message_update(chat=story, index=15, data={"mes": "Rowan never had a hat."})
    process(story)

    second.refresh_from_db()
    assert (second.status, second.retired_reason) == ("retired", "rolled_back")
    assert Decision.objects.get(memory=second, outcome="rolled_back").reason.startswith("messages from #10")
    first.refresh_from_db()
    assert first.status == "active"  # the batch before the edit is left alone
    again = details(user, status="active").exclude(pk=first.pk).get()
    assert again.content == BATCH_FACTS[10] and again.source_message_indices == list(range(10, 20))
    rebuild = PipelineJob.objects.get(chat=story, tier="rebuild")
    assert (rebuild.state, rebuild.manual, rebuild.result["batch_start"]) == ("done", False, 10)
    assert ChatPipeline.objects.get(chat=story).through["session"] == 20


def edit_then_extract_the_next_batch(story, index: int, text: str) -> None:
    """A batch of ten extracted, ten more messages indexed, message `index` edited, and the batch #10-#19 extracted
    with the edit before the recall index notes it (as happens in the seconds after an edit)."""
    grow(story, 1)
    add_turns(story, 10)
    chat_index_messages(chat_id=story.pk)
    message_update(chat=story, index=index, data={"mes": text})
    pipeline_wake(chat_id=story.pk)
    chat_run(chat_id=story.pk)


def test_an_edit_the_extraction_already_read_is_not_extracted_again(model, story, user):
    """The recall index notes a change seconds after it is made; a batch extracted meanwhile read the new text."""
    model.server.on(TASKS["session"], per_batch)
    edit_then_extract_the_next_batch(story, 15, "Rowan never had a hat.")
    asked = len(model.server.prompts(TASKS["session"]))
    assert "Rowan never had a hat." in model.server.prompts(TASKS["session"])[-1]

    process(story)  # the index notes the change at #15

    assert not PipelineJob.objects.filter(chat=story, tier="rebuild").exists()
    assert len(model.server.prompts(TASKS["session"])) == asked
    assert list(details(user).order_by("id").values_list("content", "status")) == [
        (BATCH_FACTS[0], "active"),
        (BATCH_FACTS[10], "active"),
    ]

    message_update(chat=story, index=15, data={"mes": "Rowan kept his hat after all."})
    process(story)  # read before this edit: taken back and extracted again

    rebuild = PipelineJob.objects.get(chat=story, tier="rebuild")
    assert (rebuild.state, rebuild.result["batch_start"]) == ("done", 10)
    assert "Rowan kept his hat after all." in model.server.prompts(TASKS["session"])[-1]
    assert details(user, status="active").count() == 2


def test_a_batch_that_read_an_edit_only_as_its_context_does_not_vouch_for_the_batch_before(model, story, user):
    """The job that made the edited message's memories was forgotten (jobs_prune); the next batch read the message
    as it is, but only as context before its own messages: what was made from it is still taken back."""
    model.server.on(TASKS["session"], per_batch)
    edit_then_extract_the_next_batch(story, 8, "Rowan never saw the seal.")  # #6-#9: the batch's context
    newest = PipelineJob.objects.order_by("-id").first()
    PipelineJob.objects.filter(pk__lt=newest.pk).update(created_at=timezone.now() - timedelta(days=30))
    assert jobs_prune(days=7) > 0
    assert not PipelineJob.objects.filter(chat=story, tier="session", result__range=[0, 9]).exists()

    process(story)  # the index notes the change at #8

    assert PipelineJob.objects.filter(chat=story, tier="rebuild").exists()


def test_an_edit_in_a_batch_whose_job_was_forgotten_takes_back_the_whole_batch(model, story, user):
    """The jobs are forgotten after the keeping time (jobs_prune), but which messages each batch was made from is
    kept: an edit in the middle of an old batch extracts that batch again from its first message."""
    model.server.on(TASKS["session"], per_batch)
    grow(story, 2)  # #0-#9 and #10-#19
    PipelineJob.objects.filter(chat=story).update(created_at=timezone.now() - timedelta(days=30))
    assert jobs_prune(days=7) > 0
    assert not PipelineJob.objects.filter(chat=story, tier="session", result__range=[0, 9]).exists()

    message_update(chat=story, index=5, data={"mes": "The seal was real all along."})
    process(story)

    rebuild = PipelineJob.objects.get(chat=story, tier="rebuild")
    assert (rebuild.state, rebuild.result["batch_start"]) == ("done", 0)
    again = model.server.prompts(TASKS["session"])[-1]  # what is taken back, extracted again in one batch
    assert "New messages (#0 to #19" in again and "The seal was real all along." in again
    assert list(details(user, status="active").values_list("source_message_indices", flat=True)) == [list(range(20))]


def test_rolling_back_a_ledger_update_restores_the_state_it_replaced(model, story, user):
    model.server.on(TASKS["ledger"], "[state:Rowan:character] location=harbour office")
    add_turns(story, 10)
    process(story)
    model.server.on(TASKS["ledger"], "[state:Rowan:character] location=warehouse")
    add_turns(story, 10)
    process(story)
    harbour = Memory.objects.get(kind="state", data__fields__location="harbour office")
    assert harbour.status == "retired"

    message_update(chat=story, index=18, data={"mes": "Rowan stays put."})
    pipeline_pause(chat=story)  # only the rebuild, asked for by the edit below, is let through: see it alone
    process(story)
    PipelineJob.objects.filter(chat=story, tier="rebuild").update(manual=True)
    chat_run(chat_id=story.pk, max_jobs=1)

    harbour.refresh_from_db()
    assert (harbour.status, harbour.superseded_by_id) == ("active", None)
    assert Decision.objects.filter(memory=harbour, outcome="restored").exists()
    assert Memory.objects.get(kind="state", data__fields__location="warehouse").retired_reason == "rolled_back"


def test_an_edit_far_back_waits_for_a_person_to_rebuild(model, story, user):
    extraction_settings_set(user=user, data={"auto_rebuild_max": 5, "batch_every": 10, "batch_max": 10})
    model.server.on(TASKS["session"], per_batch)
    grow(story, 3)
    message_update(chat=story, index=3, data={"mes": "A different beginning."})
    process(story)
    pipeline = ChatPipeline.objects.get(chat=story)
    assert pipeline.stale_from == 3
    assert not PipelineJob.objects.filter(chat=story, tier="rebuild").exists()
    assert details(user, status="active").count() == 3

    pipeline_rebuild(chat=story, from_index=pipeline.stale_from)
    chat_run(chat_id=story.pk)
    pipeline.refresh_from_db()
    assert pipeline.stale_from is None
    assert details(user, retired_reason="rolled_back").count() == 3  # every batch from #0 on
    assert details(user, status="active").count() == 3


def test_a_rebuild_takes_the_summary_back_to_the_version_that_ended_before_the_change(model, story, user):
    extraction_settings_set(user=user, data={"context_tokens": 1024, "compaction_share": 0.5})
    long = "The rain kept falling on the harbour while they argued about the ledger and the seal. " * 3
    add_turns(story, 30, text=lambda i: f"{long}({i})")
    model.server.on(TASKS["summary"], "Part one.")
    process(story)
    model.server.on(TASKS["summary"], "Part two.")
    add_turns(story, 20, text=lambda i: f"{long}({i})")
    process(story)
    one = Memory.objects.get(kind="summary", content="Part one.")
    end = one.data["summary_end"]
    pipeline_rebuild(chat=story, from_index=end + 2)
    pipeline_pause(chat=story)
    chat_run(chat_id=story.pk, max_jobs=1)
    one.refresh_from_db()
    assert one.status == "active"
    assert Memory.objects.get(kind="summary", content="Part one.\n\nPart two.").retired_reason == "rolled_back"
    assert ChatPipeline.objects.get(chat=story).summary_end == end


def test_a_paused_pipeline_queues_nothing_but_runs_what_a_person_asks_for(model, story, user):
    pipeline_pause(chat=story)
    add_turns(story, 12)
    process(story)
    assert not PipelineJob.objects.filter(chat=story).exists()
    pipeline_request(chat=story, tier="continuity")
    chat_run(chat_id=story.pk)
    assert list(PipelineJob.objects.filter(chat=story).values_list("tier", "state")) == [("continuity", "done")]
    pipeline_resume(chat=story)
    chat_run(chat_id=story.pk)
    assert PipelineJob.objects.get(chat=story, tier="session").state == "done"


@override_settings(LOREKEEPER_EXTRACTION={"max_attempts": 2, "retry_backoff": 1.0, "retry_backoff_max": 1.0})
def test_a_failing_model_is_retried_with_backoff_then_left_failed_until_retried(model, story, user):
    model.server.on(TASKS["session"], Reply(status=500))
    add_turns(story, 10)
    process(story)
    job = PipelineJob.objects.get(chat=story, tier="session")
    assert (job.state, job.attempts) == ("queued", 1)
    assert job.next_attempt_at is not None and job.error.startswith("attempt 1 failed: server error 500")
    time.sleep(1.0)
    chat_run(chat_id=story.pk)
    job.refresh_from_db()
    assert (job.state, job.attempts) == ("failed", 2)
    assert "server error 500 (after 4 attempts)" in job.error and f"(call #{job.llm_calls[-1]})" in job.error
    assert {"longterm", "arcs", "ledger"} <= set(
        PipelineJob.objects.filter(chat=story, state="done").values_list("tier", flat=True)
    )  # the other tiers went on
    add_turns(story, 10)
    process(story)  # a stopped tier is not queued again by itself
    assert PipelineJob.objects.filter(chat=story, tier="session").count() == 1

    model.server.on(TASKS["session"], "[detail:2:scene] The model is back.")
    job_retry(job=job)
    chat_run(chat_id=story.pk)
    job.refresh_from_db()
    assert job.state == "done" and job.manual
    assert details(user).get().content == "The model is back."


@override_settings(LOREKEEPER_EXTRACTION={"max_attempts": 1, "retry_backoff": 0.01, "retry_backoff_max": 0.01})
def test_an_unreadable_answer_is_recorded_and_fails_the_job_not_the_pipeline(model, story, user):
    model.server.on(TASKS["session"], "I'm sorry, I can't help with that request.")
    add_turns(story, 10)
    process(story)
    job = PipelineJob.objects.get(chat=story, tier="session")
    assert job.state == "failed" and job.error.startswith("nothing in the answer could be read")
    call = Call.objects.get(pk=job.llm_calls[-1])
    assert call.response == "I'm sorry, I can't help with that request."  # the raw answer stays inspectable
    assert PipelineJob.objects.get(chat=story, tier="longterm").state == "done"


def test_partly_malformed_output_keeps_the_lines_understood_and_records_the_rest(model, story, user):
    model.server.on(TASKS["session"], "[detail:2:scene] A good line.\nthis line is not in the format\n[gossip] Odd.")
    add_turns(story, 10)
    process(story)
    assert details(user).get().content == "A good line."
    job = PipelineJob.objects.get(chat=story, tier="session")
    assert job.result["unparsed"] == ["this line is not in the format", "[gossip] Odd."]


def test_a_job_already_done_is_not_run_again(model, story, user):
    add_turns(story, 10)
    process(story)
    calls, count = len(model.server.requests), Memory.objects.filter(user=user).count()
    done = PipelineJob.objects.get(chat=story, tier="session")
    assert job_execute(job_id=done.pk) is None
    assert len(model.server.requests) == calls and Memory.objects.filter(user=user).count() == count


def test_a_job_left_running_by_a_dead_runner_is_run_again(model, story, user):
    add_turns(story, 10)
    process(story)
    job = PipelineJob.objects.get(chat=story, tier="session")
    Memory.objects.filter(user=user, kind="detail").delete()
    PipelineJob.objects.filter(pk=job.pk).update(state="running", attempts=1)
    ChatPipeline.objects.filter(chat=story).update(
        through={**ChatPipeline.objects.get(chat=story).through, "session": 0}
    )
    chat_run(chat_id=story.pk)
    job.refresh_from_db()
    assert (job.state, job.attempts) == ("done", 2)
    assert details(user).count() == 1


def test_without_a_model_nothing_runs_and_the_sweep_comes_back_once_there_is_one(story, user, llm_server, scripted):
    add_turns(story, 10)
    process(story)
    assert not PipelineJob.objects.exists()
    assert ChatPipeline.objects.get(chat=story).needs_plan
    assert chats_to_run() == []  # nothing to run for a user without a model
    from apps.llm.services import connection_create, connection_update

    connection = connection_create(user=user, name="m", base_url=llm_server.url, model="m", profile="B")
    assert chats_to_run() == []  # not ticked for background work: never used for it
    connection_update(connection=connection, data={"is_default": True})
    assert chats_to_run() == [story.pk]


def test_the_sweep_finds_queued_jobs_no_runner_took_and_jobs_a_dead_runner_left(model, story, user):
    from datetime import timedelta

    from django.utils import timezone

    add_turns(story, 10)
    process(story)
    assert chats_to_run() == []
    old = timezone.now() - timedelta(minutes=5)
    job = PipelineJob.objects.get(chat=story, tier="session")
    PipelineJob.objects.filter(pk=job.pk).update(state="queued", created_at=old)
    assert chats_to_run() == [story.pk]
    PipelineJob.objects.filter(pk=job.pk).update(state="running", started_at=old)
    assert chats_to_run() == [story.pk]  # its runner lock is free: the runner died


def test_finished_jobs_are_forgotten_after_the_keeping_time_but_failed_and_newest_ones_stay(model, story, user):
    from datetime import timedelta

    from django.utils import timezone

    from apps.extraction.services.jobs import jobs_prune

    grow(story, 2)
    old = timezone.now() - timedelta(days=31)
    PipelineJob.objects.filter(chat=story).update(created_at=old)
    first_session = PipelineJob.objects.filter(chat=story, tier="session").order_by("id").first()
    failed = PipelineJob.objects.filter(chat=story, tier="arcs").order_by("id").first()
    PipelineJob.objects.filter(pk=failed.pk).update(state="failed")
    newest = {
        tier: PipelineJob.objects.filter(chat=story, tier=tier).order_by("-id").first().pk
        for tier in ("session", "longterm", "ledger")
    }
    assert jobs_prune() > 0
    assert not PipelineJob.objects.filter(pk=first_session.pk).exists()
    assert PipelineJob.objects.filter(pk=failed.pk).exists()
    assert set(newest.values()) <= set(PipelineJob.objects.values_list("pk", flat=True))


def test_a_long_backlog_is_run_in_turns_so_other_chats_get_theirs(model, story, user):
    from apps.extraction.services.consent import pipeline_run

    extraction_settings_set(user=user, data={"batch_every": 10, "batch_max": 10})
    add_turns(story, 60)
    pipeline_run(chat=story)  # the person runs the backlog
    first = chat_run(chat_id=story.pk, max_jobs=5)
    assert len(first["ran"]) == 5 and first["more"]
    rest = chat_run(chat_id=story.pk)
    assert "more" not in rest
    assert ChatPipeline.objects.get(chat=story).through["session"] == 60


def test_messages_without_text_are_covered_by_the_summary_without_asking_the_model(model, story, user):
    extraction_settings_set(user=user, data={"context_tokens": 1024, "compaction_share": 0.1})
    add_turns(story, 40, text=lambda i: "")
    process(story)
    assert ChatPipeline.objects.get(chat=story).summary_end == 40
    assert not model.server.prompts(TASKS["summary"])
