"""The extraction panel of the chat page: where each tier stands, the jobs (live while work is pending), and the
controls: run the history's extraction (it waits for the person, with an estimate), pause, resume, rebuild from a
message, run a tier now, retry what failed."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.extraction import selectors
from apps.extraction.forms import RebuildForm, RunForm
from apps.extraction.services.consent import pipeline_run
from apps.extraction.services.jobs import job_retry
from apps.extraction.services.pipeline import pipeline_pause, pipeline_rebuild, pipeline_request, pipeline_resume

PANEL = "extraction/partials/pipeline_panel.html"


def _panel(request, chat, *, error: str = "", done: str = "", decided: str = "", status: int = 200):
    """The panel, and the notice above the conversation of what waits for the person (`decided`: what their Run
    started, said there instead)."""
    context = {
        "status": selectors.pipeline_status(user=request.user, chat=chat),
        "chat": chat,
        "rebuild_form": RebuildForm(),
        "error": error,
        "done": done,
        "decided": decided,
    }
    return render(request, PANEL, context, status=status)


def _answer(request, chat, *, error: str = "", done: str = "", decided: bool = False):
    """htmx: the panel again (with what happened; `decided`: said in the notice above the conversation too); a plain
    form post: back to the chat page."""
    if request.htmx:
        said = done if decided else ""
        return _panel(request, chat, error=error, done=done, decided=said, status=400 if error else 200)
    if error:
        messages.error(request, error)
    elif done:
        messages.success(request, done)
    return redirect("chats:detail", chat.pk)


@login_required
@require_GET
def pipeline_panel(request, chat_id: int):
    return _panel(request, chat_selectors.chat_get(user=request.user, chat_id=chat_id))


@login_required
@require_POST
def pipeline_pause_view(request, chat_id: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    pipeline_pause(chat=chat)
    return _answer(request, chat, done="Extraction paused for this chat.")


@login_required
@require_POST
def pipeline_resume_view(request, chat_id: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    pipeline_resume(chat=chat)
    return _answer(request, chat, done="Extraction resumed.")


@login_required
@require_POST
def pipeline_rebuild_view(request, chat_id: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    form = RebuildForm(request.POST)
    if not form.is_valid():
        return _answer(request, chat, error="Give the message number to rebuild from (0 or more).")
    try:
        pipeline_rebuild(chat=chat, from_index=form.cleaned_data["from_index"])
    except ApplicationError as exc:
        return _answer(request, chat, error=exc.message)
    return _answer(request, chat, done=f"Rebuilding from message #{form.cleaned_data['from_index']}.")


@login_required
@require_POST
def pipeline_run_view(request, chat_id: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    form = RunForm(request.POST)
    if not form.is_valid():
        return _answer(request, chat, error="Unknown tier.")
    try:
        job = pipeline_request(chat=chat, tier=form.cleaned_data["tier"])
    except ApplicationError as exc:
        return _answer(request, chat, error=exc.message)
    return _answer(request, chat, done=f"Queued: {job.get_tier_display()}.")


@login_required
@require_POST
def pipeline_consent_view(request, chat_id: int):
    """Run: extract the chat's history, as the estimate beside the button said; the box says whether later
    backlogs of this chat wait for the person too."""
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    automatic = request.POST.get("automatic") == "on"
    pipeline_run(chat=chat, automatic=automatic)
    done = "Extracting this chat" + (", and what arrives later, automatically." if automatic else ".")
    return _answer(request, chat, done=done, decided=True)


@login_required
@require_POST
def job_retry_view(request, chat_id: int, job_id: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    job = selectors.job_get(user=request.user, job_id=job_id)
    if job.chat_id != chat.pk:
        return _answer(request, chat, error="That job belongs to another chat.")
    job_retry(job=job)
    return _answer(request, chat, done=f"Retrying: {job.get_tier_display()}.")
