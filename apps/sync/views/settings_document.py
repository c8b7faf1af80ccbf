"""The settings document in the browser: what every client of the user reads from /api/v1/settings."""

import json
import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from apps.accounts.services import settings_document_get, settings_document_patch
from apps.common.exceptions import ApplicationError


@login_required
@require_http_methods(["GET", "POST"])
def settings_document(request):
    document = settings_document_get(user=request.user)
    text, integrity, error = json.dumps(document.data, ensure_ascii=False, indent=2), document.integrity, None
    if request.method == "POST":
        text = request.POST.get("settings", "")
        try:
            value = json.loads(text)
            seen = uuid.UUID(request.POST.get("integrity", ""))
            # The whole document, replaced only if nobody changed it since this page was loaded.
            settings_document_patch(
                user=request.user, patch=[{"op": "replace", "path": "", "value": value}], kind="json", integrity=seen
            )
        except ValueError as exc:
            error = f"Not saved: {exc}."
        except ApplicationError as exc:
            error = f"Not saved: {exc.message}"
            integrity = settings_document_get(user=request.user).integrity
        else:
            messages.success(request, "Settings saved.")
            return redirect("sync:settings")
    context = {"text": text, "integrity": integrity, "error": error}
    return render(request, "sync/settings_document.html", context, status=400 if error else 200)
