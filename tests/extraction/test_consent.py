"""Background work spends the person's model budget only as far as they agreed: a chat's history waits for Run (with
an estimate of what it takes), new messages are extracted as they come, "extract automatically" (per chat or per
account) skips the question, and the daily token limit pauses everything until midnight. Over the API and the chat
page, against the scripted model over real HTTP."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from apps.extraction.models import ChatPipeline, PipelineJob
from apps.extraction.services.pipeline import pipeline_plan
from apps.extraction.services.runner import chat_run
from apps.extraction.services.settings import extraction_settings_set
from apps.llm.models import Call
from apps.llm.selectors import FOREGROUND
from apps.llm.services import connection_update
from tests.extraction.helpers import add_turns, process

pytestmark = pytest.mark.django_db

PROSE = (
    "Mira turned the ledger toward the lamp and read the harbour dues aloud, one ship at a time, while Rowan kept "
    "count of the seals and asked who had signed for the cargo that never came ashore. ({n})"
)


def status(api, chat) -> dict:
    response = api.get(f"/api/v1/chats/{chat.pk}/pipeline")
    assert response.status_code == 200
    return response.json()


def run(api, chat, **body):
    return api.post(f"/api/v1/chats/{chat.pk}/pipeline/run", body, format="json")


def background_calls(user) -> int:
    return Call.objects.filter(user=user).exclude(FOREGROUND).count()


def test_a_history_waits_for_run_with_an_estimate_and_no_model_call_happens_before(api, model, story, user):
    add_turns(story, 120, text=lambda n: PROSE.format(n=n))
    process(story)

    assert model.server.requests == [] and background_calls(user) == 0
    assert not PipelineJob.objects.filter(chat=story).exists()
    body = status(api, story)
    assert body["state"] == "awaiting_consent"
    estimate = body["estimate"]
    assert estimate["messages"] == 120 and estimate["calls"] > 0 and estimate["prompt_tokens"] > 0
    assert estimate["seconds"] is None and estimate["cost"] is None  # no measured speed, no prices yet

    response = run(api, story)
    assert response.status_code == 200 and response.json()["state"] != "awaiting_consent"
    chat_run(chat_id=story.pk)

    assert background_calls(user) > 0 and len(model.server.requests) > 0
    assert ChatPipeline.objects.get(chat=story).through["session"] == 120


def test_the_estimate_is_close_to_what_the_run_then_spends(api, model, story, user):
    connection_update(connection=model, data={"price_prompt": Decimal("2.50"), "price_reply": Decimal("10")})
    add_turns(story, 160, text=lambda n: PROSE.format(n=n))
    process(story)
    estimate = status(api, story)["estimate"]
    expected = (Decimal(estimate["prompt_tokens"]) * Decimal("2.5") + Decimal(estimate["reply_tokens"]) * 10) / (
        Decimal(1_000_000)
    )
    assert Decimal(estimate["cost"]) == expected.quantize(Decimal("0.0001"))

    run(api, story)
    chat_run(chat_id=story.pk)

    calls = background_calls(user)
    # The prompts' tokens counted as the estimate counts a message's (3.6 characters a token).
    sent = sum(len(json.dumps(request["body"]["messages"])) / 3.6 for request in model.server.requests)
    assert 0.5 <= estimate["calls"] / calls <= 2, (estimate["calls"], calls)
    assert 0.5 <= estimate["prompt_tokens"] / sent <= 2, (estimate["prompt_tokens"], sent)
    # Measured now: the time is the connection's median background call times the calls.
    assert status(api, story)["state"] != "awaiting_consent"


def test_new_messages_as_they_come_are_extracted_without_asking(model, story, user):
    for _ in range(3):
        add_turns(story, 20)
        process(story)
    assert ChatPipeline.objects.get(chat=story).through["session"] == 60
    assert background_calls(user) > 0


def test_after_run_a_new_history_asks_again_unless_the_chat_extracts_automatically(api, model, story, user):
    add_turns(story, 100)
    process(story)
    run(api, story)
    chat_run(chat_id=story.pk)
    spent = background_calls(user)

    add_turns(story, 100)  # a second import into the same chat
    process(story)
    assert background_calls(user) == spent and status(api, story)["state"] == "awaiting_consent"

    assert run(api, story, automatic=True).json()["automatic"] is True
    chat_run(chat_id=story.pk)
    add_turns(story, 100)
    process(story)
    assert ChatPipeline.objects.get(chat=story).through["session"] == 300


def test_extract_automatically_for_the_account_skips_the_question(model, story, user):
    extraction_settings_set(user=user, data={"auto_extract": True})
    add_turns(story, 100)
    process(story)
    assert ChatPipeline.objects.get(chat=story).through["session"] == 100


def test_a_connection_not_ticked_for_background_work_is_never_used_for_it(api, model, story, user):
    connection_update(connection=model, data={"is_default": False})
    extraction_settings_set(user=user, data={"auto_extract": True})
    add_turns(story, 20)
    process(story)
    assert model.server.requests == [] and status(api, story)["state"] == "no_model"


def test_the_daily_limit_pauses_background_work_until_midnight(api, model, story, user):
    add_turns(story, 20)
    process(story)
    spent = background_calls(user)
    assert spent > 0
    tokens = sum(c.prompt_tokens + c.completion_tokens for c in Call.objects.filter(user=user).exclude(FOREGROUND))
    extraction_settings_set(user=user, data={"daily_token_limit": max(1000, tokens)})
    Call.objects.filter(user=user).update(prompt_tokens=1000)  # today's spending past the limit

    add_turns(story, 20)
    process(story)

    assert background_calls(user) == spent
    body = status(api, story)
    assert body["state"] == "limit_reached" and body["tokens_today"] >= body["daily_limit"]
    assert ChatPipeline.objects.get(chat=story).needs_plan  # the sweep comes back for it
    extraction_settings_set(user=user, data={"daily_token_limit": None})
    process(story)
    assert background_calls(user) > spent


def test_bad_run_and_settings_requests_name_the_field_and_another_users_chat_is_a_404(api, other_api, model, story):
    response = run(api, story, tier="canon", automatic=True)
    assert response.status_code == 400 and "automatic" in json.dumps(response.json())
    response = api.put("/api/v1/extraction/settings", {"daily_token_limit": 5}, format="json")
    assert response.status_code == 400 and "daily_token_limit" in json.dumps(response.json())
    response = api.patch(f"/api/v1/llm/connections/{model.pk}/", {"price_prompt": "-1"}, format="json")
    assert response.status_code == 400 and "price_prompt" in json.dumps(response.json())
    assert run(other_api, story).status_code == 404
    assert not ChatPipeline.objects.filter(chat=story, approved_through__isnull=False).exists()


def test_the_chat_page_shows_the_estimate_and_runs_on_the_persons_word(web, model, story, user):
    add_turns(story, 100, text=lambda n: PROSE.format(n=n))
    process(story)
    panel = web.get(f"/chats/{story.pk}/pipeline/").content.decode()
    assert "100 messages are waiting" in panel and "Nothing is sent to the model until you run it" in panel

    response = web.post(f"/chats/{story.pk}/pipeline/consent/", {"automatic": "on"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200 and "automatically" in response.content.decode()
    pipeline = ChatPipeline.objects.get(chat=story)
    assert (pipeline.approved_through, pipeline.auto_extract) == (100, True)


def test_past_the_limit_every_background_call_is_refused_before_any_request_and_a_test_still_runs(model, user):
    from apps.llm.client import LlmError, complete
    from apps.llm.selectors import LIMIT_MESSAGE
    from apps.llm.services import budget_set, connection_test

    budget_set(user=user, daily_tokens=1000)
    Call.objects.create(user=user, connection=model, purpose="consolidation", prompt_tokens=900, completion_tokens=100)

    with pytest.raises(LlmError, match="limit"):
        complete(model, [{"role": "user", "content": "Merge these."}], purpose="hierarchy.daily")
    assert model.server.requests == [] and LIMIT_MESSAGE.startswith("Paused")
    model.server.on("Reply with OK", "OK")
    assert connection_test(connection=model).last_test_ok  # what a person asks for is not background work


def test_the_admin_shows_each_users_background_spending(client, model, user, other_user):
    from django.contrib.auth import get_user_model

    Call.objects.create(
        user=user, connection=model, purpose="extraction:session", prompt_tokens=700, completion_tokens=50
    )
    Call.objects.create(user=user, connection=model, purpose="chat", prompt_tokens=10**6, completion_tokens=1)
    root = get_user_model().objects.create_superuser(username="root", password="root pass 12345")
    client.force_login(root)

    page = client.get("/admin/llm/budget/").content.decode()

    assert "alice" in page and ">750<" in page and str(10**6) not in page  # a chat reply is not background work


def test_while_a_history_is_extracted_the_panel_says_the_time_left_at_the_models_speed(web, api, model, story, user):
    add_turns(story, 100)
    process(story)
    Call.objects.create(user=user, connection=model, purpose="extraction:session", status="ok", latency_ms=3000)
    run(api, story)
    pipeline_plan(chat_id=story.pk)  # the work queued, none run yet

    body = status(api, story)
    assert body["state"] in ("queued", "running") and body["estimate"]["messages"] == 100
    assert body["estimate"]["seconds"] == body["estimate"]["calls"] * 3.0
    panel = web.get(f"/chats/{story.pk}/pipeline/").content.decode()
    assert "100 messages to go: about" in panel and "left at this model" in panel


def test_extracting_again_after_an_edit_far_back_never_waits_for_run(api, model, story, user):
    from apps.chats.services.messages import message_update

    for _ in range(10):  # a chat that grew as it was told: 100 messages, extracted as they came
        add_turns(story, 10)
        process(story)
    message_update(chat=story, index=45, data={"mes": "A different middle."})
    process(story)  # within auto_rebuild_max (60) of the end: taken back and extracted again at once

    assert status(api, story)["state"] != "awaiting_consent"
    assert ChatPipeline.objects.get(chat=story).through["session"] == 100


def test_a_job_the_limit_refuses_waits_for_midnight_without_spending_an_attempt(model, story, user):
    from django.utils import timezone

    from apps.extraction.services.pipeline import pipeline_plan
    from apps.llm.services import budget_set

    add_turns(story, 20)
    pipeline_plan(chat_id=story.pk)  # queued while there was room
    budget_set(user=user, daily_tokens=1000)
    Call.objects.create(user=user, connection=model, purpose="consolidation", prompt_tokens=1000)
    job = PipelineJob.objects.filter(chat=story, state="queued").first()

    from apps.extraction.services.runner import job_execute

    job_execute(job_id=job.pk)

    job.refresh_from_db()
    assert (job.state, job.attempts, model.server.requests) == ("queued", 0, [])
    assert timezone.localtime(job.next_attempt_at).hour == 0 and "limit" in job.error  # midnight


def test_opening_a_chat_whose_history_waits_writes_no_recap(web, model, story, user):
    from datetime import timedelta

    from django.utils import timezone

    from apps.chats.models import Chat
    from apps.extraction.models import Recap

    add_turns(story, 100)
    process(story)
    Chat.objects.filter(pk=story.pk).update(updated_at=timezone.now() - timedelta(days=2))
    ChatPipeline.objects.filter(chat=story).update(last_active_at=timezone.now() - timedelta(days=2))

    web.post(f"/chats/{story.pk}/recap/", HTTP_HX_REQUEST="true")

    assert not Recap.objects.exists() and model.server.requests == []
