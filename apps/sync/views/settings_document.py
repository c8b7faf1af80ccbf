"""The settings document in the browser: what every client of the user reads from /api/v1/settings. The fields
Lorekeeper knows are a form (apps/sync/forms.py) that writes only what was changed; the whole document can be
edited as JSON."""

import json
import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from apps.accounts.models import SettingsDocument
from apps.accounts.services import (
    SettingsConflict,
    settings_document_get,
    settings_document_patch,
    settings_document_set,
)
from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import json_problem, loads_strict
from apps.injection.services.settings import NAMESPACE, injection_settings_get
from apps.sync.forms import KnownSettingsForm, settings_others

INCOMPLETE = "Not saved: the form was incomplete; reload the page."


def _current(request, document: SettingsDocument) -> dict:
    return {NAMESPACE: injection_settings_get(user=request.user, document=document).as_document()}


def _save_json(request) -> str:
    """The whole document replaced by the posted text, only if nobody changed it since this page was loaded; the
    error to show, or ""."""
    text = request.POST.get("settings", "")
    try:
        value = loads_strict(text)  # as a request's body: NaN, Infinity and 1e400 refused here
    except (ValueError, RecursionError) as exc:
        return f"Not saved: the JSON is not valid: {json_problem(exc)}."
    try:
        seen = uuid.UUID(request.POST.get("integrity", ""))
    except ValueError:
        return INCOMPLETE
    try:
        settings_document_patch(
            user=request.user, patch=[{"op": "replace", "path": "", "value": value}], kind="json", integrity=seen
        )
    except ApplicationError as exc:
        return f"Not saved: {exc.message}"
    return ""


def _save_fields(request, form: KnownSettingsForm) -> tuple[str, bool]:
    """The changed known fields written, only if nobody changed the document since this page was loaded; the error
    to show (or ""), and whether it was such a conflict."""
    changes = form.changes()
    if not changes:
        messages.success(request, "Nothing changed.")
        return "", False
    try:
        seen = uuid.UUID(request.POST.get("integrity", ""))
    except ValueError:
        return INCOMPLETE, False
    try:
        settings_document_set(user=request.user, values=changes, integrity=seen)
    except SettingsConflict:
        return "", True
    except ApplicationError as exc:
        return f"Not saved: {exc.message}", False
    plural = "" if len(changes) == 1 else "s"
    messages.success(request, f"Settings saved: {len(changes)} change{plural}.")
    return "", False


@login_required
@require_http_methods(["GET", "POST"])
def settings_document(request):
    document = settings_document_get(user=request.user)
    current = _current(request, document)
    form = KnownSettingsForm(current=current)
    text = json.dumps(document.data, ensure_ascii=False, indent=2)
    form_integrity, json_error, form_error, conflict = document.integrity, "", "", False
    if request.method == "POST" and "settings" in request.POST:
        json_error = _save_json(request)
        if not json_error:
            messages.success(request, "Settings saved.")
            return redirect("sync:settings")
        text = request.POST["settings"]  # the person's text is kept
        document = settings_document_get(user=request.user)
    elif request.method == "POST":
        form = KnownSettingsForm(request.POST, current=current)
        # After an error the page stays at the document it was loaded with: a change made elsewhere meanwhile is
        # then found, and shown, when it is saved again.
        form_integrity = request.POST.get("integrity", "")
        if form.is_valid():
            form_error, conflict = _save_fields(request, form)
            if not form_error and not conflict:
                return redirect("sync:settings")
        if conflict:
            document = settings_document_get(user=request.user)
            form = form.over(current=_current(request, document))
            form_integrity = document.integrity
            text = json.dumps(document.data, ensure_ascii=False, indent=2)
    unknown_keys, others = settings_others(document.data)
    context = {
        "form": form,
        "conflict": conflict,
        "form_error": form_error,
        "problems": injection_settings_get(user=request.user, document=document).problems,
        "namespace": NAMESPACE,
        "unknown_keys": unknown_keys,
        "others": others,
        "text": text,
        "integrity": document.integrity,
        "form_integrity": form_integrity,
        "error": json_error,
    }
    status = 409 if conflict else 400 if json_error or form_error or form.errors else 200
    return render(request, "sync/settings_document.html", context, status=status)
