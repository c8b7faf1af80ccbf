"""The LLM connections page: add, change, test and remove connections; recent calls and their errors."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.common.charts import day_chart
from apps.common.exceptions import ApplicationError
from apps.common.forms import posted
from apps.common.ids import id_from
from apps.llm import selectors
from apps.llm.forms import ConnectionForm, SamplerForm
from apps.llm.models import Call
from apps.llm.sampler import REPLY_TOKENS_DEFAULT
from apps.llm.services import (
    connection_create,
    connection_delete,
    connection_test,
    connection_update,
    sampler_preset_apply,
    sampler_preset_delete,
    sampler_preset_save,
)

RECENT_CALLS = 10
USAGE_DAYS = 30


def _add_error(form: ConnectionForm, exc: ApplicationError) -> None:
    field = exc.extra.get("field")
    form.add_error(field if field in form.fields else None, exc.message)


def _replies(user) -> int | None:
    """The connection a chat's replies use unless the composer names another, marked on the list."""
    connection = selectors.connection_for_replies(user_id=user.pk)
    return connection.pk if connection else None


@login_required
@require_http_methods(["GET", "POST"])
def connection_list(request):
    initial = {"api": "openai", "profile": "auto", "reply_tokens": REPLY_TOKENS_DEFAULT}
    form = ConnectionForm(posted(request), initial=initial)
    if request.method == "POST" and form.is_valid():
        data, api_key = form.service_data()
        try:
            connection = connection_create(user=request.user, api_key=api_key or "", **data)
        except ApplicationError as exc:
            _add_error(form, exc)
        else:
            messages.success(request, f"Connection “{connection.name}” saved. Test it to be sure it answers.")
            return redirect("llm:connections")
    context = {
        "connections": selectors.connection_list(user=request.user),
        "replies": _replies(request.user),
        "form": form,
        "recent_calls": selectors.call_list(user=request.user)[:RECENT_CALLS],
    }
    return render(request, "llm/connection_list.html", context, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def connection_edit(request, connection_id: int):
    connection = selectors.connection_get(user=request.user, connection_id=connection_id)
    form = ConnectionForm(request.POST) if request.method == "POST" else ConnectionForm.for_connection(connection)
    if request.method == "POST" and form.is_valid():
        data, api_key = form.service_data()
        try:
            connection_update(connection=connection, data=data, api_key=api_key)
        except ApplicationError as exc:
            _add_error(form, exc)
        else:
            messages.success(request, "Connection saved.")
            return redirect("llm:connections")
    context = {"connection": connection, "form": form, "presets": selectors.sampler_preset_list(user=request.user)}
    return render(request, "llm/connection_edit.html", context, status=400 if form.errors else 200)


def _presets_answer(request, connection, *, saved=None, error: str = ""):
    """htmx: the presets block again; else back to the connection's page with a message."""
    if request.htmx:
        context = {
            "connection": connection,
            "presets": selectors.sampler_preset_list(user=request.user),
            "preset_saved": saved,
            "preset_error": error,
        }
        return render(request, "llm/connection_edit.html#presets", context, status=400 if error else 200)
    if error:
        messages.error(request, f"Preset not saved: {error}")
    elif saved is not None:
        messages.success(request, f"Preset “{saved.name}” saved.")
    return redirect("llm:edit", connection_id=connection.pk)


@login_required
@require_POST
def preset_save_view(request, connection_id: int):
    """Saves the samplers as they stand in the connection's form (posted whole, saved or not) as a preset."""
    connection = selectors.connection_get(user=request.user, connection_id=connection_id)
    form = SamplerForm(request.POST)
    if not form.is_valid():
        field, errors = next(iter(form.errors.items()))
        label = form.fields[field].label if field in form.fields else ""
        return _presets_answer(request, connection, error=f"{label}: {errors[0]}" if label else errors[0])
    try:
        preset = sampler_preset_save(user=request.user, name=request.POST.get("preset_name", ""), values=form.sampler)
    except ApplicationError as exc:
        return _presets_answer(request, connection, error=exc.message)
    return _presets_answer(request, connection, saved=preset)


@login_required
@require_POST
def preset_apply_view(request, connection_id: int):
    connection = selectors.connection_get(user=request.user, connection_id=connection_id)
    preset_id = id_from(request.POST.get("preset", ""))
    if preset_id is None:
        raise Http404("No such preset.")
    preset = selectors.sampler_preset_get(user=request.user, preset_id=preset_id)
    try:
        sampler_preset_apply(connection=connection, preset=preset)
    except ApplicationError as exc:
        messages.error(request, f"Preset not applied: {exc.message}")
    else:
        messages.success(request, f"Preset “{preset.name}” applied: {preset.summary}.")
    return redirect("llm:edit", connection_id=connection.pk)


@login_required
@require_POST
def preset_delete_view(request, connection_id: int, preset_id: int):
    connection = selectors.connection_get(user=request.user, connection_id=connection_id)
    preset = selectors.sampler_preset_get(user=request.user, preset_id=preset_id)
    sampler_preset_delete(preset=preset)
    if not request.htmx:
        messages.success(request, f"Preset “{preset.name}” deleted.")
    return _presets_answer(request, connection)


@login_required
@require_POST
def connection_test_view(request, connection_id: int):
    connection = connection_test(connection=selectors.connection_get(user=request.user, connection_id=connection_id))
    if request.htmx:
        context = {"connection": connection, "replies": _replies(request.user)}
        return render(request, "llm/connection_list.html#connection-row", context)
    if connection.last_test_ok:
        messages.success(request, f"“{connection.name}” {connection.last_test_message}")
    else:
        messages.error(request, f"“{connection.name}” failed: {connection.last_test_message}")
    return redirect("llm:connections")


@login_required
@require_POST
def connection_delete_view(request, connection_id: int):
    connection = selectors.connection_get(user=request.user, connection_id=connection_id)
    connection_delete(connection=connection)
    messages.success(request, f"Connection “{connection.name}” removed.")
    return redirect("llm:connections")


@login_required
@require_GET
def call_list(request):
    status = request.GET.get("status") if request.GET.get("status") in Call.Status.values else None
    page = Paginator(selectors.call_list(user=request.user, status=status), 25).get_page(request.GET.get("page"))
    return render(request, "llm/call_list.html", {"page": page, "status": status})


@login_required
@require_GET
def usage_chart(request):
    """Tokens per day over the last 30 days, background work and the person's own calls stacked: loaded into the
    connections page by htmx."""
    usage = selectors.call_tokens_by_day(user=request.user, days=USAGE_DAYS)
    series = {"background": usage.background, "foreground": usage.foreground}
    context = {"usage": usage, "days": USAGE_DAYS, "chart": day_chart(usage.days, series) if usage.total else None}
    return render(request, "llm/partials/usage_chart.html", context)
