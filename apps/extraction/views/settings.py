"""The extraction settings page, and the extraction model test of a connection (Models page)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from apps.common.exceptions import ApplicationError
from apps.common.forms import posted
from apps.extraction import selectors
from apps.extraction.forms import ExtractionSettingsForm
from apps.extraction.models import ModelTest
from apps.extraction.services.model_test import ORDER, model_test_start, scenario
from apps.extraction.services.settings import extraction_settings_get, extraction_settings_set
from apps.llm import selectors as llm_selectors
from apps.llm.selectors import connection_default


@login_required
@require_http_methods(["GET", "POST"])
def settings_page(request):
    current = extraction_settings_get(user=request.user)
    form = ExtractionSettingsForm(posted(request), instance=current)
    if request.method == "POST" and form.is_valid():
        data = {name: form.cleaned_data[name] for name in form.fields}
        try:
            extraction_settings_set(user=request.user, data=data)
        except ApplicationError as exc:
            field = exc.extra.get("field")
            form.add_error(field if field in form.fields else None, exc.message)
        else:
            messages.success(request, "Extraction settings saved.")
            return redirect("extraction:settings")
    context = {"form": form, "connection": connection_default(user_id=request.user.pk)}
    return render(request, "extraction/settings.html", context, status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def model_test_page(request, connection_id: int):
    connection = llm_selectors.connection_get(user=request.user, connection_id=connection_id)
    if request.method == "POST":
        test = model_test_start(user=request.user, connection=connection)
        return redirect("extraction:model-test", connection.pk) if not request.htmx else _results(request, test)
    tests = list(selectors.model_test_list(user=request.user, connection=connection)[:6])
    test = tests[0] if tests else None
    context = {
        "connection": connection,
        "test": test,
        "running": test is not None and test.state in (ModelTest.State.QUEUED, ModelTest.State.RUNNING),
        "earlier": tests[1:],
        "scenarios": [scenario(name) for name in ORDER],
    }
    return render(request, "extraction/model_test.html", context)


def _results(request, test: ModelTest):
    running = test.state in (ModelTest.State.QUEUED, ModelTest.State.RUNNING)
    return render(request, "extraction/model_test.html#results", {"test": test, "running": running})


@login_required
@require_GET
def model_test_results(request, test_id: int):
    """The results so far; the fragment polls itself every 2 s while the test runs."""
    return _results(request, selectors.model_test_get(user=request.user, test_id=test_id))
