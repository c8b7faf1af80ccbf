"""Devices in the browser: the instances that sync with this account (named, ranked, removed) and where the feed
stands. The page's backups card comes from the archives app (apps/archives/views/backups.py), loaded after the page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.common.exceptions import ApplicationError
from apps.sync import selectors
from apps.sync.models import InstanceKind
from apps.sync.services.instances import instance_remove, instance_update


@login_required
@require_GET
def devices(request):
    context = {"status": selectors.sync_status(user=request.user), "kinds": InstanceKind.choices}
    return render(request, "sync/devices.html", context)


@login_required
@require_POST
def instance_change(request, key: str):
    instance = selectors.instance_get(user=request.user, key=key)
    data = {"name": request.POST.get("name", instance.name), "kind": request.POST.get("kind", instance.kind)}
    try:
        data["priority"] = int(request.POST.get("priority", instance.priority))
        instance_update(instance=instance, data=data)
    except ValueError:
        messages.error(request, "The priority is a whole number.")
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{instance.name} saved.")
    return redirect("sync:devices")


@login_required
@require_POST
def instance_forget(request, key: str):
    instance = selectors.instance_get(user=request.user, key=key)
    instance_remove(instance=instance)
    messages.success(request, f"{instance.name} forgotten: if it comes back, it starts again with a full pull.")
    return redirect("sync:devices")
