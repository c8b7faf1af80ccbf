"""The memory lifecycle page: the time zone the daily→yearly schedule runs in, each character's summaries with a
button to build them now (or rebuild one period), the jobs with their progress and errors, the latest decisions."""

from __future__ import annotations

from zoneinfo import available_timezones

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.common.forms import posted
from apps.llm.selectors import connection_default
from apps.memories import selectors
from apps.memories.forms import HierarchyRunForm, LifecycleSettingsForm
from apps.memories.models import LifecycleJob
from apps.memories.services.lifecycle.jobs import hierarchy_enqueue
from apps.memories.services.lifecycle.periods import LEVELS
from apps.memories.services.settings import lifecycle_settings_get, lifecycle_settings_set

JOBS_SHOWN = 20
DECISIONS_SHOWN = 20


def _characters(user):
    """The user's characters with the latest period of each level built for them."""
    characters = list(chat_selectors.character_list(user=user, by_name=True))
    periods = selectors.summary_periods_latest(user=user, characters=characters, levels=LEVELS)
    for character in characters:
        character.latest_periods = [(level, periods.get((character.pk, level), "")) for level in LEVELS]
    return characters


def _jobs_context(user) -> dict:
    jobs = list(selectors.lifecycle_job_list(user=user)[:JOBS_SHOWN])
    pending = any(job.state in (LifecycleJob.State.QUEUED, LifecycleJob.State.RUNNING) for job in jobs)
    return {"jobs": jobs, "pending": pending}


@login_required
@require_http_methods(["GET", "POST"])
def lifecycle_page(request):
    own = lifecycle_settings_get(user=request.user)
    initial = {"time_zone": own.time_zone, "hierarchy_enabled": own.hierarchy_enabled}
    form = LifecycleSettingsForm(posted(request), initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            lifecycle_settings_set(user=request.user, **form.cleaned_data)
        except ApplicationError as exc:
            form.add_error("time_zone", exc.message)
        else:
            messages.success(request, "Lifecycle settings saved.")
            return redirect("memories:lifecycle")
    decisions = selectors.decision_list_recent(user=request.user)[:DECISIONS_SHOWN]
    context = {
        "form": form,
        "run_form": HierarchyRunForm(),
        "characters": _characters(request.user),
        "connection": connection_default(user_id=request.user.pk),
        "time_zones": sorted(available_timezones()),
        "decisions": decisions,
        **_jobs_context(request.user),
    }
    return render(request, "memories/lifecycle.html", context, status=400 if form.errors else 200)


@login_required
@require_GET
def lifecycle_jobs(request):
    """The jobs table, which polls itself every 2 s while a job is queued or running."""
    return render(request, "memories/lifecycle.html#jobs", _jobs_context(request.user))


@login_required
@require_POST
def hierarchy_run_view(request, character_id: int):
    character = chat_selectors.character_get(user=request.user, character_id=character_id)
    form = HierarchyRunForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            hierarchy_enqueue(user=request.user, character=character, manual=True, **form.cleaned_data)
        except ApplicationError as exc:
            error = exc.message
    else:
        error = "; ".join(str(e) for errors in form.errors.values() for e in errors)
    if request.htmx:
        context = {**_jobs_context(request.user), "run_error": error}
        return render(request, "memories/lifecycle.html#jobs", context, status=400 if error else 200)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Summaries of {character.name} are being built.")
    return redirect("memories:lifecycle")
