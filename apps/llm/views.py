"""The LLM connections page: add, change, test and remove connections; recent calls and their errors."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.common.exceptions import ApplicationError
from apps.llm import selectors
from apps.llm.forms import ConnectionForm
from apps.llm.models import Call
from apps.llm.services import connection_create, connection_delete, connection_test, connection_update

RECENT_CALLS = 10


def _add_error(form: ConnectionForm, exc: ApplicationError) -> None:
    field = exc.extra.get("field")
    form.add_error(field if field in form.fields else None, exc.message)


@login_required
@require_http_methods(["GET", "POST"])
def connection_list(request):
    form = ConnectionForm(request.POST or None, initial={"api": "openai", "profile": "auto"})
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
    context = {"connection": connection, "form": form}
    return render(request, "llm/connection_edit.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def connection_test_view(request, connection_id: int):
    connection = connection_test(connection=selectors.connection_get(user=request.user, connection_id=connection_id))
    if request.htmx:
        return render(request, "llm/connection_list.html#connection-row", {"connection": connection})
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
