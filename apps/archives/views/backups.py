"""Backups in the browser: made now or on a schedule, downloaded, restored, and archives uploaded to import. Jobs run
in the background; their list refreshes itself while one is under way. The card sits on the devices page
(templates/sync/devices.html loads it after the page); /backups/ shows it on its own."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.archives import selectors
from apps.archives.models import BackupSettings
from apps.archives.services.backups import (
    archive_upload,
    backup_delete,
    backup_restore_start,
    backup_settings_get,
    backup_settings_set,
    backup_start,
)
from apps.common.exceptions import ApplicationError


def _list_context(request) -> dict:
    return {
        "backups": selectors.backup_list(user=request.user),
        "active": selectors.backups_active(user=request.user),
    }


def _card_context(request) -> dict:
    return {
        "settings": backup_settings_get(user=request.user),
        "modes": BackupSettings.Mode.choices,
        **_list_context(request),
    }


def _answer(request, notice: str = "", error: str = ""):
    """htmx: the backups list again (with a notice); a plain post: back to the page."""
    if request.htmx:
        context = {**_list_context(request), "notice": notice, "error": error}
        return render(request, "archives/partials/backups.html", context, status=400 if error else 200)
    if error:
        messages.error(request, error)
    elif notice:
        messages.success(request, notice)
    return redirect("sync:devices")


@login_required
@require_GET
def backups(request):
    """htmx: the list (it polls itself while a job runs); otherwise the backups card as a page of its own."""
    if request.htmx:
        return render(request, "archives/partials/backups.html", _list_context(request))
    return render(request, "archives/backups.html", _card_context(request))


@login_required
@require_GET
def backups_card(request):
    """The backups card, as the devices page loads it."""
    return render(request, "archives/partials/card.html", _card_context(request))


@login_required
@require_POST
def backup_now(request):
    try:
        backup_start(user=request.user)
    except ApplicationError as exc:
        return _answer(request, error=exc.message)
    return _answer(request, notice="Backing up: the archive appears below when it is ready.")


@login_required
@require_POST
def backup_mode(request):
    data = {"mode": request.POST.get("mode", "")}
    try:
        data["every_hours"] = int(request.POST.get("every_hours", "24"))
        data["keep"] = int(request.POST.get("keep", "5"))
        backup_settings_set(user=request.user, data=data)
    except ValueError:
        messages.error(request, "Hours and the number kept are whole numbers.")
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Backup settings saved.")
    return redirect("sync:devices")


@login_required
@require_GET
def backup_download(request, backup_id: int):
    backup = selectors.backup_get(user=request.user, backup_id=backup_id)
    if not backup.file:
        raise Http404("This job has no archive.")
    name = f"lorekeeper-{backup.created_at:%Y-%m-%d-%H%M}.zip"
    return FileResponse(backup.file.open("rb"), as_attachment=True, filename=name, content_type="application/zip")


@login_required
@require_POST
def backup_restore(request, backup_id: int):
    try:
        backup_restore_start(backup=selectors.backup_get(user=request.user, backup_id=backup_id))
    except ApplicationError as exc:
        return _answer(request, error=exc.message)
    return _answer(request, notice="Restoring: what was deleted since the backup comes back.")


@login_required
@require_POST
def backup_remove(request, backup_id: int):
    try:
        backup_delete(backup=selectors.backup_get(user=request.user, backup_id=backup_id))
    except ApplicationError as exc:
        return _answer(request, error=exc.message)
    return _answer(request, notice="Backup deleted.")


@login_required
@require_POST
def archive_import_view(request):
    upload = request.FILES.get("file")
    if upload is None:
        return _answer(request, error="Choose an archive (.zip) to import.")
    try:
        archive_upload(user=request.user, upload=upload, name=upload.name)
    except ApplicationError as exc:
        return _answer(request, error=exc.message)
    return _answer(request, notice="Importing: the result appears below when it is done.")
