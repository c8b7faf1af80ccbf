"""The extraction pipeline over the API: a chat's pipeline status and controls, its jobs, scenes, continuity checks
and away recap, the extraction settings and the model test. Another user's chat, job, scene or test is a 404."""

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.extraction.models import ChatPipeline, ExtractionSettings, ModelTest, PipelineJob, Recap, Scene
from apps.extraction.services.runner import chat_run
from apps.extraction.services.settings import extraction_settings_set
from apps.memories.models import Memory
from tests.extraction.helpers import FIRST, SECOND, STORY, add_turns, away, failed_job, process, versions

pytestmark = pytest.mark.django_db

DEFAULTS = {
    "enabled": True,
    "auto_extract": False,
    "daily_token_limit": None,
    "batch_every": 10,
    "batch_max": 40,
    "context_tokens": 8192,
    "compaction_share": 0.8,
    "scene_model_check": False,
    "min_scene_messages": 10,
    "profile_every": 20,
    "profile_stale_minutes": 30,
    "canon_auto": "auto",
    "continuity_auto": "auto",
    "recap_after_hours": 6.0,
    "auto_rebuild_max": 60,
}


def pipeline_url(chat, rest: str = "") -> str:
    return f"/api/v1/chats/{chat.pk}/pipeline{rest}"


# ------------------------------------------------------------------------------------------------ status


def test_status_of_a_new_chat_has_every_tier_at_zero_and_nothing_pending(api, model, story):
    response = api.get(pipeline_url(story))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {
        "chat",
        "state",
        "estimate",
        "automatic",
        "tokens_today",
        "daily_limit",
        "paused",
        "message_count",
        "summary_end",
        "coverage",
        "stale_from",
        "pending",
        "failed",
        "jobs",
        "continuity",
        "profiles_built_at",
        "last_active_at",
    }
    assert (body["chat"], body["state"], body["paused"], body["message_count"]) == (story.pk, "idle", False, 0)
    assert (body["summary_end"], body["pending"], body["failed"], body["jobs"]) == (0, 0, [], [])
    assert (body["continuity"], body["stale_from"], body["profiles_built_at"]) == (None, None, None)
    # In the tiers' order; the continuity check reads one reply, not a range (the latest check is `continuity`).
    assert [row["tier"] for row in body["coverage"]] == [
        "compaction",
        "scenes",
        "session",
        "longterm",
        "arcs",
        "ledger",
        "profiles",
    ]
    assert all(row["through"] == 0 and row["label"] for row in body["coverage"])


def test_status_after_processing_shows_coverage_jobs_and_the_latest_continuity_check(api, model, story):
    add_turns(story, 10)
    process(story)
    body = api.get(pipeline_url(story)).json()
    # The memory tiers read all 10; the profiles wait for more messages, and the state and the row say so.
    assert (body["state"], body["message_count"], body["pending"], body["failed"]) == ("gathering", 10, 0, [])
    through = {row["tier"]: row["through"] for row in body["coverage"]}
    assert all(through[tier] == 10 for tier in ("session", "longterm", "arcs", "ledger"))
    rows = {row["tier"]: row for row in body["coverage"]}
    assert all(rows[tier]["next_at"] is None and not rows[tier]["note"] for tier in ("session", "ledger"))
    assert through["profiles"] < 10 and rows["profiles"]["next_at"] > 10
    assert f"next at {rows['profiles']['next_at']}" in rows["profiles"]["note"]
    assert body["summary_end"] == through["compaction"]
    tiers = {job["tier"] for job in body["jobs"]}
    assert {"session", "longterm", "arcs", "ledger", "continuity"} <= tiers
    assert all(job["state"] == "done" and job["chat"] == story.pk for job in body["jobs"])
    session = next(job for job in body["jobs"] if job["tier"] == "session")
    assert session["tier_display"] == "T3 session memories" and session["llm_calls"]
    assert (session["read_from"], session["read_to"]) == (0, 10)
    assert body["continuity"]["message_index"] == 8 and body["continuity"]["status"] == "ok"


def test_status_is_no_model_without_a_connection(api, story):
    assert api.get(pipeline_url(story)).json()["state"] == "no_model"


def test_status_is_off_when_extraction_is_disabled(api, model, story, user):
    extraction_settings_set(user=user, data={"enabled": False})
    assert api.get(pipeline_url(story)).json()["state"] == "off"


def test_a_failed_tier_is_listed_for_retrying(api, model, story):
    job = failed_job(story)
    body = api.get(pipeline_url(story)).json()
    assert [failed["id"] for failed in body["failed"]] == [job.pk]
    assert body["failed"][0]["error"] == "server error 500"


# ---------------------------------------------------------------------------------------- pause, resume


def test_pause_and_resume_answer_the_status(api, model, story):
    paused = api.post(pipeline_url(story, "/pause"))
    assert paused.status_code == 200
    assert (paused.json()["paused"], paused.json()["state"]) == (True, "paused")
    assert ChatPipeline.objects.get(chat=story).paused

    resumed = api.post(pipeline_url(story, "/resume"))
    assert resumed.status_code == 200
    assert (resumed.json()["paused"], resumed.json()["state"]) == (False, "idle")
    pipeline = ChatPipeline.objects.get(chat=story)
    assert not pipeline.paused and pipeline.needs_plan


# ------------------------------------------------------------------------------------------------ rebuild


def test_rebuild_queues_a_rebuild_job(api, model, story):
    add_turns(story, 10)
    response = api.post(pipeline_url(story, "/rebuild"), {"from_index": 4}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert (body["tier"], body["state"], body["manual"]) == ("rebuild", "queued", True)
    assert body["params"] == {"from_index": 4}
    assert PipelineJob.objects.get(chat=story, tier="rebuild").pk == body["id"]
    assert api.get(pipeline_url(story)).json()["state"] == "queued"


def test_rebuild_beyond_the_chats_length_is_refused_naming_from_index(api, model, story):
    add_turns(story, 10)
    response = api.post(pipeline_url(story, "/rebuild"), {"from_index": 11}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "message": "from_index is between 0 and 10 (the chat's length).",
        "extra": {"field": "from_index"},
    }
    assert not PipelineJob.objects.exists()


@pytest.mark.parametrize("body", [{"from_index": -1}, {}, {"from_index": "soon"}])
def test_rebuild_without_a_valid_index_is_refused(api, model, story, body):
    add_turns(story, 10)
    response = api.post(pipeline_url(story, "/rebuild"), body, format="json")
    assert response.status_code == 400 and "from_index" in response.json()
    assert not PipelineJob.objects.exists()


def test_a_repeated_rebuild_with_the_same_idempotency_key_answers_the_first_answer(api, model, story):
    add_turns(story, 10)
    first = api.post(pipeline_url(story, "/rebuild"), {"from_index": 2}, format="json", HTTP_IDEMPOTENCY_KEY="rb-1")
    again = api.post(pipeline_url(story, "/rebuild"), {"from_index": 2}, format="json", HTTP_IDEMPOTENCY_KEY="rb-1")
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    other = api.post(pipeline_url(story, "/rebuild"), {"from_index": 3}, format="json", HTTP_IDEMPOTENCY_KEY="rb-1")
    assert other.status_code == 422
    assert PipelineJob.objects.get(chat=story).params == {"from_index": 2}


# ---------------------------------------------------------------------------------------------------- run


@pytest.mark.parametrize(
    ("tier", "stored"),
    [("canon", "canon"), ("continuity", "continuity"), ("profiles", "profiles"), ("compaction", "compaction")],
)
def test_running_a_tier_by_hand_queues_a_manual_job(api, model, story, tier, stored):
    add_turns(story, 4)
    response = api.post(pipeline_url(story, "/run"), {"tier": tier}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert (body["tier"], body["state"], body["manual"]) == (stored, "queued", True)
    assert body["params"] == ({"index": 2} if tier == "continuity" else {})
    assert PipelineJob.objects.get(chat=story).pk == body["id"]


def test_continuity_checks_the_reply_it_is_given(api, model, story):
    add_turns(story, 6)
    response = api.post(pipeline_url(story, "/run"), {"tier": "continuity", "index": 2}, format="json")
    assert response.status_code == 202 and response.json()["params"] == {"index": 2}
    beyond = api.post(pipeline_url(story, "/run"), {"tier": "continuity", "index": 6}, format="json")
    assert beyond.status_code == 400 and beyond.json()["extra"] == {"field": "index"}


def test_running_an_unknown_tier_is_refused(api, model, story):
    response = api.post(pipeline_url(story, "/run"), {"tier": "session"}, format="json")
    assert response.status_code == 400 and "tier" in response.json()
    assert not PipelineJob.objects.exists()


def test_continuity_without_a_reply_is_refused(api, model, story):
    response = api.post(pipeline_url(story, "/run"), {"tier": "continuity"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"message": "There is no reply to check.", "extra": {"field": "index"}}


def test_running_a_tier_without_a_model_connection_is_refused(api, story):
    add_turns(story, 4)
    response = api.post(pipeline_url(story, "/run"), {"tier": "canon"}, format="json")
    assert response.status_code == 400
    assert response.json()["extra"] == {"field": "tier"} and "model connection" in response.json()["message"]
    assert not PipelineJob.objects.exists()


# --------------------------------------------------------------------------------------------------- jobs


def test_jobs_are_listed_newest_first_in_pages(api, model, story):
    jobs = [failed_job(story, tier) for tier in ("session", "longterm", "arcs")]
    first = api.get(pipeline_url(story, "/jobs/"), {"limit": 2})
    assert first.status_code == 200
    body = first.json()
    assert set(body) == {"next", "previous", "results"}
    assert [job["id"] for job in body["results"]] == [jobs[2].pk, jobs[1].pk]
    rest = api.get(body["next"]).json()
    assert [job["id"] for job in rest["results"]] == [jobs[0].pk] and rest["next"] is None


def test_jobs_can_be_filtered_by_state(api, model, story):
    failed = failed_job(story)
    PipelineJob.objects.create(user_id=story.user_id, chat=story, tier="arcs", state="done")
    body = api.get(pipeline_url(story, "/jobs/"), {"state": "failed"}).json()
    assert [job["id"] for job in body["results"]] == [failed.pk]
    assert api.get(pipeline_url(story, "/jobs/"), {"state": "queued"}).json()["results"] == []


def test_an_unknown_job_state_is_refused(api, model, story):
    response = api.get(pipeline_url(story, "/jobs/"), {"state": "lost"})
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "state" and "failed" in response.json()["extra"]["allowed"]


def test_a_job_is_read_by_its_id(api, model, story):
    job = failed_job(story)
    response = api.get(f"/api/v1/extraction/jobs/{job.pk}/")
    assert response.status_code == 200
    assert (response.json()["id"], response.json()["state"], response.json()["chat"]) == (job.pk, "failed", story.pk)
    assert api.get(f"/api/v1/extraction/jobs/{job.pk + 1000}/").status_code == 404


def test_retrying_a_failed_job_queues_it_again_with_fresh_attempts(api, model, story):
    job = failed_job(story)
    response = api.post(f"/api/v1/extraction/jobs/{job.pk}/retry")
    assert response.status_code == 202
    body = response.json()
    assert (body["id"], body["state"], body["attempts"], body["manual"]) == (job.pk, "queued", 0, True)
    assert body["error"] == "" and body["finished_at"] is None
    job.refresh_from_db()
    assert job.state == "queued"


def test_retrying_a_job_that_is_done_answers_it_as_it_is(api, model, story):
    add_turns(story, 10)
    process(story)
    job = PipelineJob.objects.get(chat=story, tier="session")
    response = api.post(f"/api/v1/extraction/jobs/{job.pk}/retry")
    assert (response.status_code, response.json()["state"]) == (200, "done")
    job.refresh_from_db()
    assert (job.state, job.manual) == ("done", False)


def test_another_users_job_cannot_be_read_or_retried(other_api, model, story):
    job = failed_job(story)
    assert other_api.get(f"/api/v1/extraction/jobs/{job.pk}/").status_code == 404
    assert other_api.post(f"/api/v1/extraction/jobs/{job.pk}/retry").status_code == 404
    job.refresh_from_db()
    assert job.state == "failed"


# ------------------------------------------------------------------------------------------------- scenes


def test_scenes_are_listed_with_their_recap_versions(api, scene, story):
    response = api.get(f"/api/v1/chats/{story.pk}/scenes/")
    assert response.status_code == 200
    [listed] = response.json()["results"]
    assert (listed["id"], listed["start_index"], listed["end_index"]) == (scene.pk, 0, 12)
    assert (listed["recap"], listed["current_version"], listed["recap_memory"]) == (SECOND, 1, scene.recap_memory_id)
    assert [v["content"] for v in listed["recap_versions"]] == [FIRST, SECOND]
    detail = api.get(f"/api/v1/chats/{story.pk}/scenes/{scene.pk}/")
    assert detail.status_code == 200 and detail.json() == listed


def test_a_scene_is_renamed(api, scene, story):
    response = api.patch(f"/api/v1/chats/{story.pk}/scenes/{scene.pk}/", {"name": "  The ledger  "}, format="json")
    assert response.status_code == 200
    assert (response.json()["name"], response.json()["current_version"]) == ("The ledger", 1)
    assert Scene.objects.get(pk=scene.pk).name == "The ledger"


def test_switching_the_recap_version_replaces_the_recap_memory(api, scene, story):
    old = Memory.objects.get(pk=scene.recap_memory_id)
    response = api.patch(f"/api/v1/chats/{story.pk}/scenes/{scene.pk}/", {"current_version": 0}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["current_version"], body["recap"]) == (0, FIRST)
    new = Memory.objects.get(pk=body["recap_memory"])
    assert new.pk != old.pk
    assert (new.kind, new.status, new.content, new.data["version"]) == ("scene_recap", "active", FIRST, 1)
    old.refresh_from_db()
    assert (old.status, old.superseded_by_id) == ("retired", new.pk)
    active = Memory.objects.filter(chat=story, kind="scene_recap", status="active")
    assert list(active.values_list("pk", flat=True)) == [new.pk]


def test_a_recap_version_out_of_range_is_refused_naming_current_version(api, scene, story):
    response = api.patch(f"/api/v1/chats/{story.pk}/scenes/{scene.pk}/", {"current_version": 2}, format="json")
    assert response.status_code == 400
    assert response.json() == {"message": "current_version is between 0 and 1.", "extra": {"field": "current_version"}}
    negative = api.patch(f"/api/v1/chats/{story.pk}/scenes/{scene.pk}/", {"current_version": -1}, format="json")
    assert negative.status_code == 400 and "current_version" in negative.json()
    unchanged = Scene.objects.get(pk=scene.pk)
    assert (unchanged.current_version, unchanged.recap_memory_id) == (1, scene.recap_memory_id)


def test_a_new_recap_version_is_queued_as_a_scenes_job(api, scene, story):
    response = api.post(f"/api/v1/chats/{story.pk}/scenes/{scene.pk}/recap")
    assert response.status_code == 202
    body = response.json()
    assert (body["tier"], body["state"], body["manual"]) == ("scenes", "queued", True)
    assert body["params"] == {"scene": scene.pk}


def test_a_scene_of_another_chat_is_not_found_through_this_one(api, scene, user, character):
    from apps.chats.services.chats import chat_create

    other_chat = chat_create(user=user, title="Elsewhere", character_ids=[character.pk])
    assert api.get(f"/api/v1/chats/{other_chat.pk}/scenes/{scene.pk}/").status_code == 404
    patched = api.patch(f"/api/v1/chats/{other_chat.pk}/scenes/{scene.pk}/", {"name": "x"}, format="json")
    assert patched.status_code == 404
    assert api.get(f"/api/v1/chats/{other_chat.pk}/scenes/").json() == {"results": []}


# --------------------------------------------------------------------------------------------- continuity


def test_continuity_checks_are_listed_newest_first(api, model, story):
    model.server.on(
        "Task: continuity check.",
        "[contradiction] Mira says she never saw the key.\n[repair] Mira remembers the key.",
        times=1,
    )
    add_turns(story, 3)
    process(story)
    add_turns(story, 2)
    process(story)
    response = api.get(f"/api/v1/chats/{story.pk}/continuity/")
    assert response.status_code == 200
    checks = response.json()["results"]
    assert [(c["message_index"], c["status"]) for c in checks] == [(4, "ok"), (2, "contradiction")]
    assert checks[1]["findings"] == ["Mira says she never saw the key."]
    assert checks[1]["repair_note"] == "Mira remembers the key." and checks[1]["llm_call"]


# -------------------------------------------------------------------------------------------------- recap


def test_without_a_recap_get_answers_null(api, model, story):
    response = api.get(f"/api/v1/chats/{story.pk}/recap")
    assert response.status_code == 200 and response.json() == {"recap": None}


def test_returning_after_being_away_starts_a_recap(api, model, story):
    add_turns(story, 4)
    away(story)
    response = api.post(f"/api/v1/chats/{story.pk}/recap")
    assert response.status_code == 202
    recap = response.json()["recap"]
    assert recap["state"] == "pending" and recap["text"] == ""
    job = PipelineJob.objects.get(chat=story, tier="recap")
    assert (job.state, job.params) == ("queued", {"recap": recap["id"]})
    assert api.get(f"/api/v1/chats/{story.pk}/recap").json()["recap"]["id"] == recap["id"]


def test_returning_right_away_answers_the_ready_recap_without_writing_another(api, model, story):
    add_turns(story, 4)
    away(story)
    started = api.post(f"/api/v1/chats/{story.pk}/recap").json()["recap"]
    chat_run(chat_id=story.pk)
    again = api.post(f"/api/v1/chats/{story.pk}/recap")
    assert again.status_code == 200
    recap = again.json()["recap"]
    assert (recap["id"], recap["state"], recap["text"]) == (started["id"], "ready", STORY["recap"])
    assert Recap.objects.filter(chat=story).count() == 1


def test_returning_right_away_while_the_recap_is_written_answers_200(api, model, story):
    add_turns(story, 4)
    away(story)
    started = api.post(f"/api/v1/chats/{story.pk}/recap")
    again = api.post(f"/api/v1/chats/{story.pk}/recap")
    assert again.json()["recap"]["id"] == started.json()["recap"]["id"]
    assert Recap.objects.filter(chat=story).count() == 1
    assert again.status_code == 200


def test_returning_without_being_away_writes_no_recap(api, model, story):
    add_turns(story, 4)
    response = api.post(f"/api/v1/chats/{story.pk}/recap")
    assert response.status_code == 200 and response.json() == {"recap": None}
    assert not Recap.objects.exists()


def test_a_dismissed_recap_is_not_shown_again(api, model, story):
    add_turns(story, 4)
    away(story)
    recap = api.post(f"/api/v1/chats/{story.pk}/recap").json()["recap"]
    response = api.post(f"/api/v1/chats/{story.pk}/recap/{recap['id']}/dismiss")
    assert response.status_code == 200
    assert response.json()["state"] == "dismissed" and response.json()["dismissed_at"]
    assert api.get(f"/api/v1/chats/{story.pk}/recap").json() == {"recap": None}


# ----------------------------------------------------------------------------------------------- settings


def test_settings_answer_the_defaults_until_changed(api, user):
    response = api.get("/api/v1/extraction/settings")
    assert response.status_code == 200 and response.json() == DEFAULTS
    assert not ExtractionSettings.objects.filter(user=user).exists()


def test_a_settings_update_changes_only_what_it_gives(api, user):
    response = api.put(
        "/api/v1/extraction/settings", {"batch_every": 5, "canon_auto": "off", "enabled": False}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {**DEFAULTS, "batch_every": 5, "canon_auto": "off", "enabled": False}
    stored = ExtractionSettings.objects.get(user=user)
    assert (stored.batch_every, stored.canon_auto, stored.enabled, stored.batch_max) == (5, "off", False, 40)
    assert api.get("/api/v1/extraction/settings").json()["batch_every"] == 5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"compaction_share": 0}, "compaction_share"),
        ({"compaction_share": 1.5}, "compaction_share"),
        ({"batch_every": 0}, "batch_every"),
        ({"batch_every": 20, "batch_max": 10}, "batch_max"),
        ({"batch_every": 50}, "batch_max"),
        ({"context_tokens": 100}, "context_tokens"),
        ({"min_scene_messages": 1}, "min_scene_messages"),
        ({"recap_after_hours": 0.1}, "recap_after_hours"),
    ],
)
def test_settings_out_of_range_are_refused_naming_the_field(api, user, body, field):
    response = api.put("/api/v1/extraction/settings", body, format="json")
    assert response.status_code == 400
    assert response.json()["extra"] == {"field": field} and field in response.json()["message"]
    assert not ExtractionSettings.objects.filter(user=user).exists()


def test_an_unknown_auto_choice_is_refused(api, user):
    response = api.put("/api/v1/extraction/settings", {"canon_auto": "maybe"}, format="json")
    assert response.status_code == 400 and "canon_auto" in response.json()
    assert not ExtractionSettings.objects.filter(user=user).exists()


# --------------------------------------------------------------------------------------------- model test


def test_a_model_test_of_another_users_connection_is_not_found(api, other_user, llm_server):
    from apps.llm.services import connection_create

    theirs = connection_create(user=other_user, name="bob's", base_url=llm_server.url, model="bob-model")
    response = api.post("/api/v1/extraction/model-tests/", {"connection": theirs.pk}, format="json")
    assert response.status_code == 404
    assert not ModelTest.objects.exists()


def test_a_model_test_is_queued_for_an_own_connection(api, llm):
    response = api.post("/api/v1/extraction/model-tests/", {"connection": llm.pk}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert (body["connection"], body["connection_name"], body["model"]) == (llm.pk, "scripted", "scripted-model")
    assert (body["state"], body["results"]) == ("queued", [])
    assert ModelTest.objects.get().pk == body["id"]


def test_a_model_test_runs_every_scenario_through_the_tiers(api, llm, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        started = api.post("/api/v1/extraction/model-tests/", {"connection": llm.pk}, format="json")
    assert started.status_code == 202
    response = api.get(f"/api/v1/extraction/model-tests/{started.json()['id']}/")
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["error"]) == ("done", "") and body["finished_at"]
    assert [block["scenario"] for block in body["results"]] == ["investigation", "healer", "heist"]
    for block in body["results"]:
        assert [tier["tier"] for tier in block["tiers"]][:2] == ["compaction", "session"]
        assert block["tiers"][-1]["tier"] == "continuity"
        assert all(isinstance(tier["hints"], list) and tier["hints"] for tier in block["tiers"])
    assert llm.server.requests  # it asked the model


def test_model_tests_are_listed_and_private(api, other_api, llm):
    first = api.post("/api/v1/extraction/model-tests/", {"connection": llm.pk}, format="json").json()
    second = api.post("/api/v1/extraction/model-tests/", {"connection": llm.pk}, format="json").json()
    listed = api.get("/api/v1/extraction/model-tests/")
    assert listed.status_code == 200
    assert [test["id"] for test in listed.json()["results"]] == [second["id"], first["id"]]
    assert api.get(f"/api/v1/extraction/model-tests/{first['id']}/").json()["id"] == first["id"]
    assert other_api.get(f"/api/v1/extraction/model-tests/{first['id']}/").status_code == 404
    assert other_api.get("/api/v1/extraction/model-tests/").json()["results"] == []


# ------------------------------------------------------------------------------------------------ tenancy


@pytest.fixture
def owned(model, story):
    """A scene, a recap and a failed job in the story, for addressing them through every route."""
    add_turns(story, 4)
    scene = Scene.objects.create(
        user=story.user, chat=story, start_index=0, end_index=2, recap_versions=versions(FIRST, SECOND)
    )
    recap = Recap.objects.create(user=story.user, chat=story, away_since=timezone.now(), state="ready", text="Before.")
    return {"chat": story.pk, "scene": scene.pk, "recap": recap.pk, "job": failed_job(story).pk}


ROUTES = [
    ("get", "/api/v1/chats/{chat}/pipeline", None),
    ("post", "/api/v1/chats/{chat}/pipeline/pause", None),
    ("post", "/api/v1/chats/{chat}/pipeline/resume", None),
    ("post", "/api/v1/chats/{chat}/pipeline/rebuild", {"from_index": 0}),
    ("post", "/api/v1/chats/{chat}/pipeline/run", {"tier": "canon"}),
    ("get", "/api/v1/chats/{chat}/pipeline/jobs/", None),
    ("get", "/api/v1/chats/{chat}/scenes/", None),
    ("get", "/api/v1/chats/{chat}/scenes/{scene}/", None),
    ("patch", "/api/v1/chats/{chat}/scenes/{scene}/", {"name": "Mine now", "current_version": 0}),
    ("post", "/api/v1/chats/{chat}/scenes/{scene}/recap", None),
    ("get", "/api/v1/chats/{chat}/continuity/", None),
    ("get", "/api/v1/chats/{chat}/recap", None),
    ("post", "/api/v1/chats/{chat}/recap", None),
    ("post", "/api/v1/chats/{chat}/recap/{recap}/dismiss", None),
    ("get", "/api/v1/extraction/jobs/{job}/", None),
    ("post", "/api/v1/extraction/jobs/{job}/retry", None),
]


def call(client, method: str, url: str, body):
    return getattr(client, method)(url, body, format="json") if body is not None else getattr(client, method)(url)


@pytest.mark.parametrize(("method", "url", "body"), ROUTES, ids=[f"{m} {u}" for m, u, _ in ROUTES])
def test_another_users_chat_is_not_found_and_left_alone(other_api, owned, method, url, body):
    response = call(other_api, method, url.format(**owned), body)
    assert response.status_code == 404, response.content
    assert list(PipelineJob.objects.values_list("state", flat=True)) == ["failed"]
    assert not ChatPipeline.objects.filter(paused=True).exists()
    scene = Scene.objects.get(pk=owned["scene"])
    assert (scene.name, scene.current_version) == ("", 0)
    assert Recap.objects.get(pk=owned["recap"]).state == "ready"


@pytest.mark.parametrize(("method", "url", "body"), ROUTES, ids=[f"{m} {u}" for m, u, _ in ROUTES])
def test_an_anonymous_request_is_unauthorised(owned, method, url, body):
    response = call(APIClient(), method, url.format(**owned), body)
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/api/v1/extraction/settings"),
        ("put", "/api/v1/extraction/settings"),
        ("get", "/api/v1/extraction/model-tests/"),
        ("post", "/api/v1/extraction/model-tests/"),
        ("get", "/api/v1/extraction/model-tests/1/"),
    ],
)
def test_an_anonymous_request_for_settings_or_model_tests_is_unauthorised(db, method, url):
    assert getattr(APIClient(), method)(url).status_code == 401
