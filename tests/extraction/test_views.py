"""The extraction pages: the chat page's pipeline panel and recap panel (htmx fragments, and plain form posts that
redirect), the story page with its scenes, the settings page and the model test of a connection. Another user's
chat, job, scene, recap, connection or test is a 404; a visitor is sent to sign in."""

import re

import pytest
from django.utils import timezone

from apps.chats.services.chats import chat_create
from apps.extraction.models import ChatPipeline, ExtractionSettings, ModelTest, PipelineJob, Recap, Scene
from apps.extraction.services.pipeline import pipeline_pause
from apps.extraction.services.runner import chat_run
from apps.memories.models import Memory
from tests.extraction.helpers import FIRST, SECOND, STORY, add_turns, away, failed_job, process, versions

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
POLL = 'hx-trigger="every 2s"'  # the recap panel's
PANEL_POLL = 'hx-trigger="every 2s, lorekeeper:written'  # the pipeline panel's: also after a write on the page
PANEL_LISTENS = 'hx-trigger="lorekeeper:written from:body delay:1s"'  # idle: only after a write
SETTINGS = {
    "enabled": "on",
    "batch_every": "10",
    "batch_max": "40",
    "context_tokens": "8192",
    "compaction_share": "0.8",
    "min_scene_messages": "10",
    "profile_every": "20",
    "profile_stale_minutes": "30",
    "canon_auto": "auto",
    "continuity_auto": "auto",
    "recap_after_hours": "6",
    "auto_rebuild_max": "60",
}


def html(response) -> str:
    return response.content.decode()


def is_panel(response) -> bool:
    return html(response).lstrip().startswith('<section class="card pipeline" id="pipeline"') and (
        "<html" not in html(response)
    )


# ------------------------------------------------------------------------------------------- chat page, panel


def test_the_chat_page_loads_the_pipeline_panel_and_the_recap_panel(web, story):
    page = html(web.get(f"/chats/{story.pk}/"))
    assert f'<div id="recap-panel" hx-post="/chats/{story.pk}/recap/" hx-trigger="load"' in page
    assert f'id="pipeline" hx-get="/chats/{story.pk}/pipeline/" hx-trigger="load"' in page
    assert f'href="/chats/{story.pk}/story/"' in page


def test_the_recap_loader_posts_with_the_pages_csrf_token(user, story):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    page = html(browser.get(f"/chats/{story.pk}/"))
    token = re.search(r'<body hx-headers=\'\{"X-CSRFToken": "([^"]+)"\}\'>', page)[1]
    assert browser.post(f"/chats/{story.pk}/recap/", HTTP_HX_REQUEST="true").status_code == 403
    loaded = browser.post(f"/chats/{story.pk}/recap/", HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
    assert loaded.status_code == 200 and html(loaded).lstrip().startswith('<div id="recap-panel"')


def test_the_panel_shows_coverage_and_jobs_and_stops_polling_once_idle(web, model, story):
    add_turns(story, 10)
    process(story)
    response = web.get(f"/chats/{story.pk}/pipeline/", **HX)
    assert response.status_code == 200 and is_panel(response)
    panel = html(response)
    # No "up to date" beside a row that is behind: the profiles wait for more messages, and say until when.
    assert '<span class="badge pipeline-gathering">waiting for more messages</span>' in panel
    assert '<th scope="row">T3 session memories</th>' in panel and "10 of 10 messages" in panel
    assert '<tr class="coverage-note"><td colspan="3">Rebuilt every' in panel
    assert "nothing summarised yet" in panel and panel.count('">0 of 10 messages</td>') == 1  # the profiles
    assert '<tr class="job-done">' in panel and "T3 long-term memories" in panel
    assert f'Continuity of reply <a href="/chats/{story.pk}/?at=8">#8</a>:' in panel and "consistent." in panel
    assert PANEL_POLL not in panel and PANEL_LISTENS in panel


def test_the_panel_polls_while_a_job_is_queued(web, model, story):
    add_turns(story, 4)
    response = web.post(f"/chats/{story.pk}/pipeline/run/", {"tier": "canon"}, **HX)
    assert response.status_code == 200 and is_panel(response)
    assert PANEL_POLL in html(response)
    assert "Queued: T4 canon." in html(response) and "(1 pending)" in html(response)
    chat_run(chat_id=story.pk)
    assert PANEL_POLL not in html(web.get(f"/chats/{story.pk}/pipeline/"))


def test_the_panel_says_a_tier_whose_tries_fail_before_it_gives_up(web, model, story):
    """A model answering what cannot be read: each try failed unseen for minutes, the panel saying "waiting" and
    "under a minute left" until the fifth try gave up. The last try's error shows while the job waits again."""
    add_turns(story, 4)
    model.server.on(lambda prompt: True, "I'd rather tell you a story about the sea.")
    web.post(f"/chats/{story.pk}/pipeline/run/", {"tier": "continuity"}, **HX)
    chat_run(chat_id=story.pk)
    panel = html(web.get(f"/chats/{story.pk}/pipeline/"))
    tried = '<p class="notice retrying-tier" role="status"><strong>continuity check</strong>: attempt 1 failed:'
    assert tried in panel and "tried again within a minute, 1 of 5 tries so far)" in panel


def test_the_panel_polls_while_a_job_asked_for_by_hand_waits_on_a_paused_pipeline(web, model, story):
    add_turns(story, 4)
    pipeline_pause(chat=story)
    response = web.post(f"/chats/{story.pk}/pipeline/run/", {"tier": "canon"}, **HX)
    assert response.status_code == 200 and "(1 pending)" in html(response)
    polls = PANEL_POLL in html(response)
    assert chat_run(chat_id=story.pk)["ran"]  # the runner takes it, paused or not: the panel should follow it
    assert polls


def test_the_panel_says_there_is_no_model_without_a_connection(web, story):
    panel = html(web.get(f"/chats/{story.pk}/pipeline/"))
    assert '<span class="badge pipeline-no_model">no model</span>' in panel
    assert "No connection does background memory work:" in panel and 'href="/llm/"' in panel
    assert "Nothing extracted yet" in panel and PANEL_POLL not in panel and PANEL_LISTENS in panel


def test_the_panel_says_extraction_is_off(web, model, story, user):
    ExtractionSettings.objects.create(user=user, enabled=False)
    panel = html(web.get(f"/chats/{story.pk}/pipeline/"))
    assert "Extraction is switched off" in panel and 'href="/extraction/settings/"' in panel


def test_the_panel_offers_a_retry_of_a_failed_tier_and_a_rebuild_of_stale_messages(web, model, story):
    add_turns(story, 10)
    job = failed_job(story)
    ChatPipeline.objects.create(chat=story, user=story.user, stale_from=3)
    panel = html(web.get(f"/chats/{story.pk}/pipeline/"))
    assert "<strong>T3 session memories</strong> stopped: server error 500" in panel
    assert f'hx-post="/chats/{story.pk}/pipeline/jobs/{job.pk}/retry/"' in panel
    assert "Messages from #3 on changed" in panel and "Rebuild from #3" in panel


# ---------------------------------------------------------------------------------------------- controls


def test_pause_and_resume_by_htmx_answer_the_panel(web, model, story):
    paused = web.post(f"/chats/{story.pk}/pipeline/pause/", **HX)
    assert paused.status_code == 200 and is_panel(paused)
    assert "Extraction paused for this chat." in html(paused) and ">Resume</button>" in html(paused)
    assert ChatPipeline.objects.get(chat=story).paused

    resumed = web.post(f"/chats/{story.pk}/pipeline/resume/", **HX)
    assert resumed.status_code == 200 and is_panel(resumed)
    assert "Extraction resumed." in html(resumed) and ">Pause</button>" in html(resumed)
    assert not ChatPipeline.objects.get(chat=story).paused


def test_a_plain_pause_redirects_to_the_chat_page_with_the_outcome(web, model, story):
    response = web.post(f"/chats/{story.pk}/pipeline/pause/")
    assert response.status_code == 302 and response["Location"] == f"/chats/{story.pk}/"
    assert "Extraction paused for this chat." in html(web.get(response["Location"]))
    resumed = web.post(f"/chats/{story.pk}/pipeline/resume/")
    assert resumed.status_code == 302 and not ChatPipeline.objects.get(chat=story).paused


def test_the_controls_take_only_post(web, model, story):
    for action in ("pause", "resume", "rebuild", "run"):
        assert web.get(f"/chats/{story.pk}/pipeline/{action}/").status_code == 405


def test_rebuild_by_htmx_queues_it_and_answers_the_panel(web, model, story):
    add_turns(story, 10)
    response = web.post(f"/chats/{story.pk}/pipeline/rebuild/", {"from_index": "3"}, **HX)
    assert response.status_code == 200 and is_panel(response)
    assert "Rebuilding from message #3." in html(response) and PANEL_POLL in html(response)
    job = PipelineJob.objects.get(chat=story)
    assert (job.tier, job.state, job.params, job.manual) == ("rebuild", "queued", {"from_index": 3}, True)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"from_index": "11"}, "from_index is between 0 and 10"),
        ({"from_index": "-1"}, "Give the message number to rebuild from (0 or more)."),
        ({}, "Give the message number to rebuild from (0 or more)."),
    ],
)
def test_a_refused_rebuild_answers_400_with_the_reason(web, model, story, data, message):
    add_turns(story, 10)
    response = web.post(f"/chats/{story.pk}/pipeline/rebuild/", data, **HX)
    assert response.status_code == 400 and is_panel(response)
    assert '<p class="error" role="alert">' in html(response) and message in html(response)
    assert not PipelineJob.objects.exists()


def test_a_plain_refused_rebuild_redirects_with_the_error(web, model, story):
    add_turns(story, 10)
    response = web.post(f"/chats/{story.pk}/pipeline/rebuild/", {"from_index": "99"})
    assert response.status_code == 302 and response["Location"] == f"/chats/{story.pk}/"
    assert "from_index is between 0 and 10" in html(web.get(response["Location"]))
    assert not PipelineJob.objects.exists()


@pytest.mark.parametrize("tier", ["canon", "continuity", "profiles", "compaction"])
def test_running_a_tier_by_htmx_queues_it(web, model, story, tier):
    add_turns(story, 4)
    response = web.post(f"/chats/{story.pk}/pipeline/run/", {"tier": tier}, **HX)
    assert response.status_code == 200 and is_panel(response)
    job = PipelineJob.objects.get(chat=story)
    assert (job.tier, job.state, job.manual) == (tier, "queued", True)
    assert f"Queued: {job.get_tier_display()}." in html(response)


def test_a_plain_run_redirects_to_the_chat_page(web, model, story):
    add_turns(story, 4)
    response = web.post(f"/chats/{story.pk}/pipeline/run/", {"tier": "profiles"})
    assert response.status_code == 302 and response["Location"] == f"/chats/{story.pk}/"
    assert PipelineJob.objects.get(chat=story).tier == "profiles"


def test_running_an_unknown_tier_or_continuity_without_a_reply_is_refused(web, model, story):
    unknown = web.post(f"/chats/{story.pk}/pipeline/run/", {"tier": "session"}, **HX)
    assert unknown.status_code == 400 and "Unknown tier." in html(unknown)
    no_reply = web.post(f"/chats/{story.pk}/pipeline/run/", {"tier": "continuity"}, **HX)
    assert no_reply.status_code == 400 and "There is no reply to check." in html(no_reply)
    assert not PipelineJob.objects.exists()


def test_running_a_tier_without_a_model_is_refused(web, story):
    add_turns(story, 4)
    response = web.post(f"/chats/{story.pk}/pipeline/run/", {"tier": "canon"}, **HX)
    assert response.status_code == 400 and "Add a model connection first (Models page)." in html(response)
    assert not PipelineJob.objects.exists()


def test_retrying_a_failed_job_by_htmx_queues_it_again(web, model, story):
    job = failed_job(story)
    response = web.post(f"/chats/{story.pk}/pipeline/jobs/{job.pk}/retry/", **HX)
    assert response.status_code == 200 and is_panel(response)
    assert "Retrying: T3 session memories." in html(response) and PANEL_POLL in html(response)
    job.refresh_from_db()
    assert (job.state, job.attempts, job.error, job.manual) == ("queued", 0, "", True)


def test_a_plain_retry_redirects_to_the_chat_page(web, model, story):
    job = failed_job(story)
    response = web.post(f"/chats/{story.pk}/pipeline/jobs/{job.pk}/retry/")
    assert response.status_code == 302 and response["Location"] == f"/chats/{story.pk}/"
    job.refresh_from_db()
    assert job.state == "queued"


def test_retrying_a_job_through_another_chat_of_the_same_user_is_refused(web, model, story, user, character):
    job = failed_job(story)
    elsewhere = chat_create(user=user, title="Elsewhere", character_ids=[character.pk])
    response = web.post(f"/chats/{elsewhere.pk}/pipeline/jobs/{job.pk}/retry/", **HX)
    assert response.status_code == 400 and "That job belongs to another chat." in html(response)
    plain = web.post(f"/chats/{elsewhere.pk}/pipeline/jobs/{job.pk}/retry/")
    assert plain.status_code == 302 and plain["Location"] == f"/chats/{elsewhere.pk}/"
    job.refresh_from_db()
    assert job.state == "failed"


# ------------------------------------------------------------------------------------------------ story page


def test_the_story_page_shows_scenes_ledger_arcs_knowledge_and_profiles(web, model, story):
    def text(i):
        return "The next morning the fog had lifted over the docks." if i == 12 else f"Talk at the ledger desk {i}."

    add_turns(story, 20, text=text)
    process(story)
    scene = Scene.objects.get(chat=story)
    response = web.get(f"/chats/{story.pk}/story/")
    assert response.status_code == 200
    page = html(response)
    # Folded to a line (a long story has hundreds of scenes), the start of its recap in it; renaming on demand.
    assert f'<article class="scene" id="scene-{scene.pk}">\n  <details>\n  <summary class="memory-head">' in page
    assert '<span class="scene-gist">' in page and '<details class="rename">' in page
    at = f"/chats/{story.pk}/?at="
    assert f'messages <a href="{at}0">#0</a>–<a href="{at}11">#11</a> · break: time:' in page
    assert "Mira and Rowan examined the harbour ledger" in page
    assert "<dt>location</dt><dd>harbour office</dd>" in page and "<dt>owner</dt><dd>Rowan</dd>" in page
    assert "Find out who forged the harbour seal." in page
    assert '<span class="badge stance-knows">knows</span>' in page
    assert "the harbour seal on the ledger is forged" in page
    assert "Mira is tense and sharp." in page and "The harbour is under the guild" in page
    assert "No reply checked yet." not in page  # continuity ran on profile B


def test_memory_data_a_client_wrote_in_another_shape_breaks_no_story_page(web, api, story):
    """`data` is any object a client sends (the API, a sync push): a holder that was a list (no key to group by),
    and a ledger type or a profile section that was a number beside a name (no order between them), broke the story
    page."""
    for kind, content, data in [
        ("epistemic", "Mira knows the seal is forged.", {"holder": ["Mira"]}),
        ("state", "The lantern is lit.", {"type": 5, "key": "lantern"}),
        ("state", "Rowan owns the ledger desk.", {"type": "owner", "key": "desk"}),
        ("profile", "Mira is tense.", {"section": 5}),
        ("profile", "The guild rules the harbour.", {"section": "world_state"}),
    ]:
        body = {"chat": story.pk, "kind": kind, "content": content, "data": data}
        assert api.post("/api/v1/memories/", body, format="json").status_code == 201
    page = web.get(f"/chats/{story.pk}/story/")
    assert page.status_code == 200
    assert "Mira is tense." in html(page) and "The guild rules the harbour." in html(page)


def test_the_story_page_of_a_new_chat_says_nothing_was_found_yet(web, story):
    page = html(web.get(f"/chats/{story.pk}/story/"))
    assert "No scene break found yet." in page and "Nothing in the ledger yet." in page
    assert "No profiles yet." in page and "No reply checked yet." in page


def test_the_story_page_heads_profiles_by_their_section_in_words(web, model, story):
    add_turns(story, 20)
    process(story)
    page = html(web.get(f"/chats/{story.pk}/story/"))
    assert "Mira is tense and sharp." in page
    assert "<h3>Character state</h3>" in page and "<h3>Relationship matrix</h3>" in page


def test_renaming_a_scene_by_htmx_answers_the_scene(web, scene, story):
    response = web.post(f"/chats/{story.pk}/scenes/{scene.pk}/", {"name": "The ledger"}, **HX)
    assert response.status_code == 200
    fragment = html(response)
    assert fragment.lstrip().startswith(f'<article class="scene" id="scene-{scene.pk}">') and "<html" not in fragment
    assert "<strong>The ledger</strong>" in fragment and "<details open>" in fragment  # open after the action
    assert Scene.objects.get(pk=scene.pk).name == "The ledger"


def test_switching_the_recap_version_by_htmx_answers_the_scene_with_that_version(web, scene, story):
    old = scene.recap_memory_id
    response = web.post(f"/chats/{story.pk}/scenes/{scene.pk}/", {"current_version": "0"}, **HX)
    assert response.status_code == 200
    fragment = html(response)
    assert fragment.lstrip().startswith(f'<article class="scene" id="scene-{scene.pk}">')
    assert FIRST in fragment and '<option value="0" selected>' in fragment
    scene.refresh_from_db()
    assert scene.current_version == 0 and scene.recap_memory_id != old
    assert Memory.objects.get(pk=scene.recap_memory_id).content == FIRST
    assert Memory.objects.get(pk=old).status == "retired"


def test_a_recap_version_out_of_range_answers_400_with_the_scene(web, scene, story):
    response = web.post(f"/chats/{story.pk}/scenes/{scene.pk}/", {"current_version": "5"}, **HX)
    assert response.status_code == 400
    assert "current_version is between 0 and 1." in html(response) and SECOND.replace("'", "&#x27;") in html(response)
    assert Scene.objects.get(pk=scene.pk).current_version == 1


def test_a_plain_scene_change_redirects_to_the_story_page(web, scene, story):
    response = web.post(f"/chats/{story.pk}/scenes/{scene.pk}/", {"name": "Dusk"})
    assert response.status_code == 302 and response["Location"] == f"/chats/{story.pk}/story/"
    assert "Scene saved." in html(web.get(response["Location"]))
    refused = web.post(f"/chats/{story.pk}/scenes/{scene.pk}/", {"current_version": "x"})
    assert refused.status_code == 302 and "Enter a whole number." in html(web.get(refused["Location"]))


def test_asking_for_a_new_scene_recap_queues_it(web, scene, story):
    response = web.post(f"/chats/{story.pk}/scenes/{scene.pk}/recap/", **HX)
    assert response.status_code == 200
    assert "A new recap is being written" in html(response)
    job = PipelineJob.objects.get(chat=story)
    assert (job.tier, job.params, job.manual) == ("scenes", {"scene": scene.pk}, True)
    plain = web.post(f"/chats/{story.pk}/scenes/{scene.pk}/recap/")
    assert plain.status_code == 302 and plain["Location"] == f"/chats/{story.pk}/story/"


def test_asking_for_a_new_scene_recap_without_a_model_is_refused(web, scene, story, model):
    model.delete()
    response = web.post(f"/chats/{story.pk}/scenes/{scene.pk}/recap/", **HX)
    assert response.status_code == 400 and "Add a model connection first" in html(response)
    assert not PipelineJob.objects.exists()


# ---------------------------------------------------------------------------------------------- recap panel


def test_opening_the_chat_after_being_away_writes_a_recap_and_the_panel_polls_until_ready(web, model, story):
    add_turns(story, 4)
    away(story)
    opened = web.post(f"/chats/{story.pk}/recap/", **HX)
    assert opened.status_code == 200
    panel = html(opened)
    assert panel.lstrip().startswith('<div id="recap-panel"') and "<html" not in panel
    assert "writing a recap" in panel and f'hx-get="/chats/{story.pk}/recap/" {POLL}' in panel
    assert POLL in html(web.get(f"/chats/{story.pk}/recap/", **HX))  # still being written

    chat_run(chat_id=story.pk)
    ready = html(web.get(f"/chats/{story.pk}/recap/", **HX))
    assert STORY["recap"] in ready and POLL not in ready and "recap-ready" in ready


def test_opening_the_chat_without_being_away_shows_no_recap(web, model, story):
    add_turns(story, 4)
    panel = html(web.post(f"/chats/{story.pk}/recap/", **HX))
    assert "Previously on" not in panel and POLL not in panel
    assert not Recap.objects.exists()


def test_dismissing_the_recap_empties_the_panel(web, model, story):
    add_turns(story, 4)
    away(story)
    web.post(f"/chats/{story.pk}/recap/", **HX)
    recap = Recap.objects.get(chat=story)
    response = web.post(f"/chats/{story.pk}/recap/{recap.pk}/dismiss/", **HX)
    assert response.status_code == 200
    assert html(response).strip().startswith('<div id="recap-panel">') and "Previously on" not in html(response)
    assert Recap.objects.get(pk=recap.pk).state == "dismissed"
    assert "Previously on" not in html(web.get(f"/chats/{story.pk}/recap/", **HX))


def test_a_plain_dismiss_redirects_to_the_chat_page(web, model, story):
    recap = Recap.objects.create(user=story.user, chat=story, away_since=timezone.now(), state="ready", text="Hi.")
    response = web.post(f"/chats/{story.pk}/recap/{recap.pk}/dismiss/")
    assert response.status_code == 302 and response["Location"] == f"/chats/{story.pk}/"
    assert Recap.objects.get(pk=recap.pk).state == "dismissed"


# --------------------------------------------------------------------------------------------- settings page


def test_the_settings_page_shows_the_defaults_and_that_no_model_is_set(web):
    response = web.get("/extraction/settings/")
    assert response.status_code == 200
    page = html(response)
    assert "<h1>Extraction settings</h1>" in page and 'name="batch_every" value="10"' in page
    assert "No connection does background memory work yet" in page


def test_the_settings_page_links_to_the_model_test_of_the_default_connection(web, llm):
    page = html(web.get("/extraction/settings/"))
    assert f'href="/llm/{llm.pk}/model-test/"' in page and "Test how well it extracts" in page


def test_saving_the_settings_redirects_with_a_message(web, user):
    response = web.post("/extraction/settings/", {**SETTINGS, "batch_every": "5", "canon_auto": "off"})
    assert response.status_code == 302 and response["Location"] == "/extraction/settings/"
    stored = ExtractionSettings.objects.get(user=user)
    assert (stored.batch_every, stored.canon_auto, stored.enabled, stored.scene_model_check) == (5, "off", True, False)
    assert "Extraction settings saved." in html(web.get("/extraction/settings/"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"batch_every": "20", "batch_max": "10"}, "batch_max must be at least batch_every."),
        ({"min_scene_messages": "1"}, "Between 2 and 500."),
        ({"canon_auto": "maybe"}, "Select a valid choice."),
        ({"batch_every": ""}, "This field is required."),
    ],
)
def test_invalid_settings_answer_400_with_the_error_and_save_nothing(web, user, change, message):
    response = web.post("/extraction/settings/", {**SETTINGS, **change})
    assert response.status_code == 400
    assert message in html(response) and 'role="alert"' in html(response)
    assert not ExtractionSettings.objects.filter(user=user).exists()


@pytest.mark.parametrize(("field", "value"), [("compaction_share", "0"), ("batch_every", "0")])
def test_a_value_the_database_forbids_is_refused(web, user, field, value):
    response = web.post("/extraction/settings/", {**SETTINGS, field: value})
    assert response.status_code == 400 and 'role="alert"' in html(response)
    assert not ExtractionSettings.objects.filter(user=user).exists()


def test_a_compaction_share_out_of_range_is_explained_on_its_field(web, user):
    response = web.post("/extraction/settings/", {**SETTINGS, "compaction_share": "0"})
    assert response.status_code == 400
    assert "Constraint" not in html(response)
    assert '<span class="field-error" role="alert">Between 0.1 and 1.</span>' in html(response)


# ------------------------------------------------------------------------------------------------ model test


def test_the_model_test_page_shows_the_scenarios(web, llm):
    response = web.get(f"/llm/{llm.pk}/model-test/")
    assert response.status_code == 200
    page = html(response)
    assert "How well does scripted-model extract?" in page
    assert "The counterfeit signet" in page and "The Ember Crown job" in page and "healer" in page
    assert "30 messages" in page and "Not run yet." in page


def test_running_the_model_test_from_the_page_starts_it(web, llm):
    response = web.post(f"/llm/{llm.pk}/model-test/")
    assert response.status_code == 302 and response["Location"] == f"/llm/{llm.pk}/model-test/"
    test = ModelTest.objects.get()
    assert (test.connection_id, test.state) == (llm.pk, "queued")
    page = html(web.get(response["Location"]))
    assert f'hx-get="/llm/model-tests/{test.pk}/" {POLL}' in page and "Not run yet." not in page


def test_running_the_model_test_by_htmx_answers_the_results_until_done(web, llm, django_capture_on_commit_callbacks):
    queued = web.post(f"/llm/{llm.pk}/model-test/", **HX)
    assert queued.status_code == 200
    assert html(queued).lstrip().startswith('<section class="card model-test" id="results"') and POLL in html(queued)
    first = ModelTest.objects.get()

    with django_capture_on_commit_callbacks(execute=True):
        web.post(f"/llm/{llm.pk}/model-test/", **HX)
    test = ModelTest.objects.order_by("-id").first()
    assert test.state == "done"
    results = html(web.get(f"/llm/model-tests/{test.pk}/"))
    assert POLL not in results and '<span class="badge">done</span>' in results
    assert "<strong>compaction</strong>" in results and "<strong>continuity</strong>" in results
    assert "hint-chip" in results
    earlier = html(web.get(f"/llm/{llm.pk}/model-test/"))
    assert "Earlier runs" in earlier and f'href="/llm/model-tests/{first.pk}/"' in earlier


def test_another_users_connection_and_model_test_are_not_found(web, other_user, llm_server):
    from apps.llm.services import connection_create

    theirs = connection_create(user=other_user, name="bob's", base_url=llm_server.url, model="bob-model")
    test = ModelTest.objects.create(user=other_user, connection=theirs, model="bob-model")
    assert web.get(f"/llm/{theirs.pk}/model-test/").status_code == 404
    assert web.post(f"/llm/{theirs.pk}/model-test/").status_code == 404
    assert web.post(f"/llm/{theirs.pk}/model-test/", **HX).status_code == 404
    assert web.get(f"/llm/model-tests/{test.pk}/").status_code == 404
    assert ModelTest.objects.count() == 1


def test_the_models_page_links_to_the_extraction_test(web, llm):
    page = html(web.get("/llm/"))
    assert f'<a href="/llm/{llm.pk}/model-test/">Test extraction</a>' in page


# --------------------------------------------------------------------------------------------------- tenancy


@pytest.fixture
def theirs(other_story):
    """Another user's chat with a scene, a recap and a failed job."""
    scene = Scene.objects.create(
        user=other_story.user, chat=other_story, start_index=0, end_index=2, recap_versions=versions(FIRST, SECOND)
    )
    recap = Recap.objects.create(
        user=other_story.user, chat=other_story, away_since=timezone.now(), state="ready", text="Theirs."
    )
    return {"chat": other_story.pk, "scene": scene.pk, "recap": recap.pk, "job": failed_job(other_story).pk}


WEB_ROUTES = [
    ("get", "/chats/{chat}/pipeline/", {}),
    ("post", "/chats/{chat}/pipeline/pause/", {}),
    ("post", "/chats/{chat}/pipeline/resume/", {}),
    ("post", "/chats/{chat}/pipeline/rebuild/", {"from_index": "0"}),
    ("post", "/chats/{chat}/pipeline/run/", {"tier": "canon"}),
    ("post", "/chats/{chat}/pipeline/jobs/{job}/retry/", {}),
    ("get", "/chats/{chat}/recap/", {}),
    ("post", "/chats/{chat}/recap/", {}),
    ("post", "/chats/{chat}/recap/{recap}/dismiss/", {}),
    ("get", "/chats/{chat}/story/", {}),
    ("post", "/chats/{chat}/scenes/{scene}/", {"name": "Mine now"}),
    ("post", "/chats/{chat}/scenes/{scene}/", {"current_version": "1"}),
    ("post", "/chats/{chat}/scenes/{scene}/recap/", {}),
]
WEB_IDS = [f"{method} {url} {sorted(data)}" for method, url, data in WEB_ROUTES]


@pytest.mark.parametrize("headers", [{}, HX], ids=["page", "htmx"])
@pytest.mark.parametrize(("method", "url", "data"), WEB_ROUTES, ids=WEB_IDS)
def test_another_users_chat_is_not_found_on_every_route(web, model, theirs, method, url, data, headers):
    response = getattr(web, method)(url.format(**theirs), data, **headers)
    assert response.status_code == 404
    assert list(PipelineJob.objects.values_list("state", flat=True)) == ["failed"]
    assert not ChatPipeline.objects.filter(paused=True).exists()
    scene = Scene.objects.get(pk=theirs["scene"])
    assert (scene.name, scene.current_version) == ("", 0)
    assert Recap.objects.get(pk=theirs["recap"]).state == "ready"


def test_another_users_job_cannot_be_retried_through_an_own_chat(web, model, story, theirs):
    response = web.post(f"/chats/{story.pk}/pipeline/jobs/{theirs['job']}/retry/", **HX)
    assert response.status_code == 404
    assert PipelineJob.objects.get(pk=theirs["job"]).state == "failed"


def test_a_paused_pipeline_stays_paused_after_another_users_resume(web, model, theirs, other_story):
    pipeline_pause(chat=other_story)
    assert web.post(f"/chats/{other_story.pk}/pipeline/resume/", **HX).status_code == 404
    assert ChatPipeline.objects.get(chat=other_story).paused


@pytest.mark.parametrize(
    ("method", "url", "data"),
    [
        *WEB_ROUTES,
        ("get", "/extraction/settings/", {}),
        ("post", "/extraction/settings/", SETTINGS),
        ("get", "/llm/1/model-test/", {}),
        ("post", "/llm/1/model-test/", {}),
        ("get", "/llm/model-tests/1/", {}),
    ],
    ids=[*WEB_IDS, "get settings", "post settings", "get model test", "post model test", "get model test results"],
)
def test_a_visitor_is_sent_to_sign_in(client, theirs, method, url, data):
    response = getattr(client, method)(url.format(**theirs), data)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert list(PipelineJob.objects.values_list("state", flat=True)) == ["failed"]
    assert not ExtractionSettings.objects.exists() and not ModelTest.objects.exists()
