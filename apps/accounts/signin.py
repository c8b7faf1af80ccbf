"""Sign-in with a pause after repeated failures: LOREKEEPER_LOGIN_ATTEMPTS failed attempts for one account (or five
times that from one address) within LOREKEEPER_LOGIN_WINDOW_SECONDS, and further attempts are refused with 429
until the window passes. Counted in the shared cache; a cache that is down does not lock anybody out."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache

from apps.accounts.audit import audit_record, client_ip
from apps.accounts.models import AuditEvent

log = logging.getLogger(__name__)
ADDRESS_FACTOR = 5  # an address may try several accounts (a household, a shared connection)


def _keys(request) -> list[tuple[str, int]]:
    limit = settings.LOREKEEPER_LOGIN_ATTEMPTS
    name = str(request.POST.get("username", "")).strip().lower()[:150]
    keys = [(f"signin:ip:{client_ip(request)}", limit * ADDRESS_FACTOR)]
    if name:
        keys.append((f"signin:user:{name}", limit))
    return keys


def _count(key: str) -> int:
    try:
        return int(cache.get(key, 0))
    except Exception as exc:  # noqa: BLE001 — no cache, no lock-out
        log.warning("sign-in attempts not counted (cache unavailable): %s", exc)
        return 0


def _bump(key: str) -> int:
    window = settings.LOREKEEPER_LOGIN_WINDOW_SECONDS
    try:
        if cache.add(key, 1, timeout=window):
            return 1
        return int(cache.incr(key))
    except Exception as exc:  # noqa: BLE001
        log.warning("sign-in attempts not counted (cache unavailable): %s", exc)
        return 0


class SignInView(auth_views.LoginView):
    def post(self, request, *args, **kwargs):
        if any(_count(key) >= limit for key, limit in _keys(request)):
            return self._paused()
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        counts = [(_bump(key), limit) for key, limit in _keys(self.request)]
        if any(count == limit for count, limit in counts):  # the attempt that reached the limit: recorded once
            name = str(self.request.POST.get("username", ""))[:150]
            audit_record(action=AuditEvent.Action.LOGIN_LOCKED, target=name, ip=client_ip(self.request))
        return super().form_invalid(form)

    def form_valid(self, form):
        name = str(self.request.POST.get("username", "")).strip().lower()[:150]
        try:
            cache.delete(f"signin:user:{name}")
        except Exception:  # noqa: BLE001, S110 — nothing to forget without a cache
            pass
        return super().form_valid(form)

    def _paused(self):
        minutes = max(1, settings.LOREKEEPER_LOGIN_WINDOW_SECONDS // 60)
        form = self.get_form()
        form.errors.clear()
        form.add_error(None, f"Too many failed sign-ins: try again in {minutes} minutes.")
        response = self.render_to_response(self.get_context_data(form=form))
        response.status_code = 429
        response["Retry-After"] = str(settings.LOREKEEPER_LOGIN_WINDOW_SECONDS)
        return response
