"""The daily→weekly→monthly→yearly hierarchy: built in the user's time zone once each period is due, every missed
period caught up at the next run, a manual trigger for any period, the originals kept."""

import re
import uuid
from datetime import UTC, datetime

import pytest

from apps.chats.services.chats import chat_create
from apps.memories.embeddings import text_hash
from apps.memories.models import Decision, LifecycleJob, Memory
from apps.memories.services.lifecycle.hierarchy import hierarchy_run
from apps.memories.services.lifecycle.jobs import hierarchy_tick
from apps.memories.services.lifecycle.periods import parse_key
from apps.memories.services.settings import lifecycle_settings_set
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db
ASKED = re.compile(r"(daily|weekly|monthly|yearly) summary for (\S+)\. Material")


def _summarise(prompt: str) -> Reply:
    granularity, period = ASKED.search(prompt).groups()
    return Reply(f"<think>Let me summarise.</think>The {granularity} of {period}.")


@pytest.fixture
def summariser(hosted_llm):
    hosted_llm.server.on(lambda prompt: ASKED.search(prompt) is not None, _summarise)
    return hosted_llm


@pytest.fixture
def said(user, character):
    """Messages of the character's chat stored at given UTC times."""
    chat = chat_create(user=user, title="Journal", character_ids=[character.pk])

    def say(when: datetime, text: str) -> Memory:
        index = Memory.objects.filter(chat=chat).count()
        memory = Memory.objects.create(
            user=user,
            chat=chat,
            kind="message",
            message_index=index,
            content=f"Mira: {text}",
            content_hash=text_hash(text),
        )
        Memory.objects.filter(pk=memory.pk).update(created_at=when)
        return memory

    return say


def _built(character) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for kind, data in Memory.objects.filter(
        character=character, kind__in=["daily", "weekly", "monthly", "yearly"]
    ).values_list("kind", "data"):
        found.setdefault(kind, []).append(data["period"])
    return {k: sorted(v) for k, v in found.items()}


def _asked(hosted_llm) -> list[str]:
    return [" ".join(ASKED.search(p).groups()) for p in hosted_llm.server.prompts() if ASKED.search(p)]


def test_periods_across_the_year_boundary_are_built_in_the_users_time_zone_and_order(
    user, character, said, summariser, scripted
):
    lifecycle_settings_set(user=user, time_zone="Europe/Berlin")
    said(datetime(2026, 12, 30, 10, 0, tzinfo=UTC), "The lantern festival began.")
    said(datetime(2026, 12, 31, 23, 30, tzinfo=UTC), "Fireworks over the harbour.")  # 00:30 on 1 January in Berlin
    said(datetime(2027, 1, 2, 12, 0, tzinfo=UTC), "Corvin fell ill.")

    built = hierarchy_run(character=character, connection=summariser, now=datetime(2027, 1, 11, 6, 0, tzinfo=UTC))

    assert built == {
        "daily": ["2026-12-30", "2027-01-01", "2027-01-02"],
        "weekly": ["2026-W53"],
        "monthly": ["2026-12"],  # January is due on 1 February
        "yearly": ["2026"],
    }
    assert _asked(summariser) == [
        "daily 2026-12-30",
        "daily 2027-01-01",
        "daily 2027-01-02",
        "weekly 2026-W53",
        "monthly 2026-12",
        "yearly 2026",
    ]
    week = Memory.objects.get(kind="weekly")
    assert (week.content, week.data["start"], week.data["end"]) == (
        "The weekly of 2026-W53.",
        "2026-12-28",
        "2027-01-03",
    )
    [weekly_prompt] = summariser.server.prompts("weekly summary for 2026-W53")
    assert "The daily of 2026-12-30." in weekly_prompt and "The daily of 2027-01-02." in weekly_prompt
    [monthly_prompt] = summariser.server.prompts("monthly summary for 2026-12")
    assert "The daily of 2026-12-30." in monthly_prompt and "2027-01-01" not in monthly_prompt.split("Material")[1]
    [daily_prompt] = summariser.server.prompts("daily summary for 2027-01-01")
    assert "Fireworks over the harbour." in daily_prompt
    # Summaries are additions: the dailies stay, each summary says what made it.
    assert Memory.objects.filter(kind="daily", status="active").count() == 3
    assert Decision.objects.filter(outcome="summarised").count() == 6
    assert hierarchy_run(character=character, connection=summariser, now=datetime(2027, 1, 11, 7, tzinfo=UTC)) == {
        "daily": [],
        "weekly": [],
        "monthly": [],
        "yearly": [],
    }


def test_nothing_is_built_before_it_is_due(user, character, said, summariser, scripted):
    said(datetime(2026, 11, 20, 12, tzinfo=UTC), "Friday.")
    assert (
        hierarchy_run(character=character, connection=summariser, now=datetime(2026, 11, 21, 4, 59, tzinfo=UTC))[
            "daily"
        ]
        == []
    )
    built = hierarchy_run(character=character, connection=summariser, now=datetime(2026, 11, 21, 5, 0, tzinfo=UTC))
    assert built["daily"] == ["2026-11-20"] and built["weekly"] == []
    assert hierarchy_run(character=character, connection=summariser, now=datetime(2026, 11, 29, 5, tzinfo=UTC))[
        "weekly"
    ] == ["2026-W47"]


def test_a_worker_that_was_down_catches_up_every_missed_period(user, character, said, summariser, scripted):
    said(datetime(2026, 10, 1, 12, tzinfo=UTC), "October.")
    hierarchy_run(character=character, connection=summariser, now=datetime(2026, 10, 2, 6, tzinfo=UTC))
    said(datetime(2026, 10, 20, 12, tzinfo=UTC), "Later in October.")
    said(datetime(2026, 11, 3, 12, tzinfo=UTC), "November.")
    # Down from 2 October to 15 November.
    built = hierarchy_run(character=character, connection=summariser, now=datetime(2026, 11, 15, 6, tzinfo=UTC))
    assert built["daily"] == ["2026-10-20", "2026-11-03"]
    assert built["weekly"] == ["2026-W40", "2026-W43", "2026-W45"]
    assert built["monthly"] == ["2026-10"]
    [october] = summariser.server.prompts("monthly summary for 2026-10")
    assert "The weekly of 2026-W43." in october and "The daily of 2026-10-01." in october  # W40 straddles September


def test_a_day_that_already_has_a_daily_from_the_api_is_not_summarised_again(
    user, character, said, summariser, scripted, api
):
    said(datetime(2026, 11, 20, 12, tzinfo=UTC), "Friday.")
    response = api.post(
        "/api/v1/memories/",
        {
            "character": character.pk,
            "kind": "daily",
            "content": "My own notes.",
            "occurred_at": "2026-11-20T09:00:00Z",
        },
        format="json",
    )
    assert response.status_code == 201 and response.json()["data"] == {"period": "2026-11-20"}
    assert (
        hierarchy_run(character=character, connection=summariser, now=datetime(2026, 11, 30, tzinfo=UTC))["daily"]
        == []
    )
    [weekly] = summariser.server.prompts("weekly summary for 2026-W47")
    assert "My own notes." in weekly


def test_a_week_is_made_from_every_instances_daily_of_its_days(user, character, said, summariser, scripted):
    """Each instance owns its daily memory of a day (entity-core's YYYY-MM-DD_instance, docs/GLOSSARY.md): the week
    reads them all."""
    from tests.sync.instances import change, push

    said(datetime(2026, 11, 20, 12, tzinfo=UTC), "Friday.")
    day = {"kind": "daily", "character": character.uid, "date": "2026-11-20"}
    push(user, "laptop", change("create", uuid.uuid4(), {"laptop": 1}, content="- Laptop [chat:1]", **day))
    push(user, "phone", change("create", uuid.uuid4(), {"phone": 1}, content="- Phone [chat:2]", **day))
    assert (
        hierarchy_run(character=character, connection=summariser, now=datetime(2026, 11, 30, tzinfo=UTC))["daily"]
        == []
    )
    [weekly] = summariser.server.prompts("weekly summary for 2026-W47")
    assert "[daily 2026-11-20 via laptop] - Laptop [chat:1] [via:laptop]" in weekly
    assert "[daily 2026-11-20 via phone] - Phone [chat:2] [via:phone]" in weekly


def test_a_failing_model_leaves_the_job_failed_and_the_next_run_builds_it(
    user, character, said, hosted_llm, scripted, django_capture_on_commit_callbacks
):
    said(datetime(2026, 11, 20, 12, tzinfo=UTC), "Friday.")
    hosted_llm.server.on("summary for", Reply(status=429, headers={"retry-after": "0"}))
    with django_capture_on_commit_callbacks(execute=True):
        assert hierarchy_tick(now=datetime(2026, 11, 21, 6, tzinfo=UTC)) == 1
    job = LifecycleJob.objects.get()
    assert job.state == "failed" and "rate limited (429)" in job.error
    assert not Memory.objects.filter(kind="daily").exists()
    hosted_llm.server.on("summary for", "Friday, summarised.")
    with django_capture_on_commit_callbacks(execute=True):
        hierarchy_tick()
    assert Memory.objects.get(kind="daily").content == "Friday, summarised."


@pytest.mark.parametrize("period", ["0001-01-01", "9999-12-31", 5, ["2026-11-20"]])
def test_a_daily_summary_of_a_period_no_calendar_holds_stops_no_ones_tick(
    user, other_user, character, said, hosted_llm, scripted, period
):
    """A summary a client stored (sync, an archive, or before periods were bounded) whose period is at the edge of
    the calendar, or no text at all: the tick, which plans every user's characters, skips it and goes on."""
    from apps.llm.services import connection_create
    from tests.chats.factories import CharacterFactory

    said(datetime(2026, 11, 20, 12, tzinfo=UTC), "Friday.")
    Memory.objects.create(
        user=user, character=character, kind="daily", content="- Odd.", content_hash=text_hash("- Odd."),
        data={"period": period},
    )  # fmt: skip
    theirs = CharacterFactory(user=other_user)
    connection_create(
        user=other_user, name="Theirs", base_url=hosted_llm.server.url, model="m", profile="B", is_default=True
    )
    chat = chat_create(user=other_user, title="Log", character_ids=[theirs.pk])
    hello = Memory.objects.create(
        user=other_user, chat=chat, kind="message", content="Hello.", content_hash=text_hash("Hello."), message_index=0
    )
    Memory.objects.filter(pk=hello.pk).update(created_at=datetime(2026, 11, 20, 12, tzinfo=UTC))

    assert hierarchy_tick(now=datetime(2026, 11, 21, 6, tzinfo=UTC)) == 2


def test_the_tick_skips_users_without_a_model_or_with_the_hierarchy_off(user, character, said, scripted):
    said(datetime(2026, 11, 20, 12, tzinfo=UTC), "Friday.")
    assert hierarchy_tick() == 0
    lifecycle_settings_set(user=user, hierarchy_enabled=False)
    assert hierarchy_tick() == 0


def test_a_manual_run_rebuilds_a_period_before_it_is_due_and_supersedes_the_old_summary(
    user, character, said, summariser, scripted, api, django_capture_on_commit_callbacks
):
    said(datetime(2026, 11, 16, 12, tzinfo=UTC), "Monday.")
    said(datetime(2026, 11, 17, 12, tzinfo=UTC), "Tuesday.")
    hierarchy_run(character=character, connection=summariser, now=datetime(2026, 11, 18, 6, tzinfo=UTC))
    body = {"character": character.pk, "granularity": "weekly", "period": "2026-W47"}
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post("/api/v1/memories/hierarchy", body, format="json")
        assert response.status_code == 202, response.content
    jobs = api.get(f"/api/v1/memories/lifecycle/jobs/?character={character.pk}").json()["results"]
    assert [(j["state"], j["result"]["built"]["weekly"]) for j in jobs] == [("done", ["2026-W47"])] * 2
    first, second = Memory.objects.filter(kind="weekly").order_by("id")
    assert (first.status, first.superseded_by_id, second.status) == ("retired", second.pk, "active")


def test_a_forced_period_that_is_due_as_well_is_built_once(character, said, summariser, scripted):
    """A manual run of a week that has ended (and so is due too): one summary, one call. It was built as due, then
    again as forced, the first summary superseded at once (found once the calendar passed the week above)."""
    said(datetime(2026, 11, 16, 12, tzinfo=UTC), "Monday.")
    said(datetime(2026, 11, 17, 12, tzinfo=UTC), "Tuesday.")
    built = hierarchy_run(
        character=character, connection=summariser, now=datetime(2026, 11, 30, 6, tzinfo=UTC),
        force=parse_key("weekly", "2026-W47"),
    )  # fmt: skip
    assert built["weekly"] == ["2026-W47"]
    assert Memory.objects.filter(kind="weekly").count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"granularity": "weekly"}, "period"),
        ({"granularity": "weekly", "period": "2026-11"}, "period"),
        ({"granularity": "hourly", "period": "x"}, "granularity"),
        # A week or month at the calendar's edge: reckoning its days passed the years datetime holds.
        ({"granularity": "weekly", "period": "9999-W52"}, "period"),
        ({"granularity": "monthly", "period": "9999-12"}, "period"),
        ({"granularity": "daily", "period": "0001-01-01"}, "period"),
    ],
)
def test_a_manual_run_with_a_bad_period_is_refused_naming_the_field(api, character, body, field):
    response = api.post("/api/v1/memories/hierarchy", {"character": character.pk, **body}, format="json")
    assert response.status_code == 400
    assert field in str(response.json())
    assert not LifecycleJob.objects.exists()


@pytest.mark.parametrize("raw", ["-1", " 5", "5.0", "x", "²", "9" * 19])
def test_a_job_list_filtered_by_a_character_that_is_not_an_id_is_refused(api, raw):
    response = api.get("/api/v1/memories/lifecycle/jobs/", {"character": raw})
    assert response.status_code == 400
    assert "character" in str(response.json())


def test_another_users_character_and_jobs_are_404(
    api, other_api, character, said, summariser, scripted, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        job = api.post("/api/v1/memories/hierarchy", {"character": character.pk}, format="json").json()
    assert other_api.post("/api/v1/memories/hierarchy", {"character": character.pk}, format="json").status_code == 404
    assert other_api.get(f"/api/v1/memories/lifecycle/jobs/{job['id']}/").status_code == 404
    assert other_api.get("/api/v1/memories/lifecycle/jobs/").json()["results"] == []


def test_a_job_lost_for_over_an_hour_is_marked_failed_and_work_is_queued_again(user, character):
    from datetime import timedelta

    from django.utils import timezone

    from apps.memories.services.lifecycle.jobs import hierarchy_enqueue

    lost = hierarchy_enqueue(user=user, character=character)
    assert hierarchy_enqueue(user=user, character=character).pk == lost.pk  # joins the pending one
    LifecycleJob.objects.filter(pk=lost.pk).update(created_at=timezone.now() - timedelta(hours=2))
    fresh = hierarchy_enqueue(user=user, character=character)
    assert fresh.pk != lost.pk
    lost.refresh_from_db()
    assert lost.state == "failed" and "abandoned" in lost.error


def test_an_imported_story_is_summarised_by_its_own_dates_in_each_style_sillytavern_writes(
    user, character, summariser, scripted, django_capture_on_commit_callbacks
):
    import io
    import json

    from apps.chats.services.chats import chat_import

    lines = [
        {"user_name": "Rowan", "character_name": "Mira"},
        {"name": "Mira", "mes": "The siege began.", "send_date": "2024-03-04T10:00:00.000Z"},  # ISO
        {"name": "Mira", "mes": "The walls held.", "send_date": "2024-03-05 @10h00m00s"},  # the old form
        {"name": "Mira", "mes": "The gate fell.", "send_date": "March 6, 2024 10:00am"},  # 1.12's
    ]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    with django_capture_on_commit_callbacks(execute=True):
        chat_import(user=user, stream=io.BytesIO(body), character_ids=[character.pk])

    built = hierarchy_run(character=character, connection=summariser, now=datetime(2026, 11, 23, 6, tzinfo=UTC))

    # The story's own days, not the day it was imported. Its calendar says when a day is over: the 6th, its latest,
    # is not until the story moves past it, and nor is March.
    assert built["daily"] == ["2024-03-04", "2024-03-05"] and built["monthly"] == []
    [march_5] = summariser.server.prompts("daily summary for 2024-03-05")
    assert "The walls held." in march_5 and "The siege began." not in march_5
