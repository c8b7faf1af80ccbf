"""The lifecycle page and the 'why is this memory here' section of the memory page."""

import pytest

from apps.memories.models import LifecycleJob, LifecycleSettings
from tests.lifecycle.helpers import at_cosine, unit

pytestmark = pytest.mark.django_db


def test_the_memory_page_says_why_a_memory_was_retired(web, submit, scripted):
    scripted.vectors["Mira lives by the harbour."] = unit(0)
    scripted.vectors["Mira no longer lives by the harbour."] = at_cosine(0.7)
    [old], [new] = (
        submit(("fact", "Mira lives by the harbour.")),
        submit(("fact", "Mira no longer lives by the harbour.")),
    )
    page = web.get(f"/memories/{old.memory.pk}/").content.decode()
    assert "Why this memory is here" in page
    assert "superseded an older memory" in page and "no longer" in page and f"#{new.memory.pk}" in page
    assert "similarity 0.700" in page


def test_the_lifecycle_page_saves_the_time_zone_and_refuses_an_unknown_one(web, user, character):
    page = web.get("/memories/lifecycle/")
    text = page.content.decode()
    assert page.status_code == 200 and "Mira" in text and "No connection does background memory work" in text
    bad = web.post("/memories/lifecycle/", {"time_zone": "Nowhere/Land", "hierarchy_enabled": "on"})
    assert bad.status_code == 400 and "Unknown time zone" in bad.content.decode()
    good = web.post("/memories/lifecycle/", {"time_zone": "Europe/Paris"})
    assert good.status_code == 302
    own = LifecycleSettings.objects.get(user=user)
    assert (own.time_zone, own.hierarchy_enabled) == ("Europe/Paris", False)


def test_build_now_queues_a_job_and_the_jobs_table_polls_while_it_is_pending(web, character):
    response = web.post(
        f"/memories/lifecycle/run/{character.pk}/", {"granularity": "", "period": ""}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    html = response.content.decode()
    job = LifecycleJob.objects.get()
    # Without on-commit execution the job stays queued: the fragment polls until it is not.
    assert job.state == "queued" and 'hx-trigger="every 2s"' in html
    refused = web.post(
        f"/memories/lifecycle/run/{character.pk}/", {"granularity": "weekly", "period": "soon"}, HTTP_HX_REQUEST="true"
    )
    assert refused.status_code == 400 and "period of a weekly run looks like 2026-W47" in refused.content.decode()
    full = web.post(f"/memories/lifecycle/run/{character.pk}/", {})
    assert full.status_code == 302


def test_another_users_character_cannot_be_run(web, other_user):
    from tests.chats.factories import CharacterFactory

    theirs = CharacterFactory(user=other_user)
    assert web.post(f"/memories/lifecycle/run/{theirs.pk}/", {}).status_code == 404


def test_build_now_says_what_it_built_or_why_it_built_nothing(web, user, character):
    def done(built, **params):
        return LifecycleJob.objects.create(
            user=user, character=character, type="hierarchy", state="done", params=params, result={"built": built}
        )

    done({"daily": ["2026-11-20", "2026-11-21"], "weekly": [], "monthly": [], "yearly": []})
    done({"daily": [], "weekly": [], "monthly": [], "yearly": []})
    done({"daily": [], "weekly": [], "monthly": [], "yearly": []}, granularity="weekly", period="2026-W40")

    page = web.get("/memories/lifecycle/").content.decode()

    assert "built daily 2026-11-20, 2026-11-21;" in page
    assert "nothing built: no period was due" in page
    assert "nothing built: weekly 2026-W40 holds no messages or summaries to summarise" in page
    assert "merged entr" not in page
