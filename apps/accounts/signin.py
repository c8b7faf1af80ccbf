"""Sign-in with a pause after repeated attempts: LOREKEEPER_LOGIN_ATTEMPTS failed attempts for one account (or five
times that from one address) within LOREKEEPER_LOGIN_WINDOW_SECONDS, and further attempts are refused with 429,
without checking the password, until the window passes. Both the site's sign-in and the admin's count.

An attempt is counted before its password is checked, so parallel guesses cannot slip past the limit; a successful
sign-in takes its attempt back. Counted in the shared cache; a cache that is down does not lock anybody out."""

from __future__ import annotations

import logging
import unicodedata

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.sites import AdminSite
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpResponse
from django.utils.html import escape

from apps.accounts.audit import audit_record, client_ip
from apps.accounts.models import AuditEvent

log = logging.getLogger(__name__)
ADDRESS_FACTOR = 5  # an address may try several accounts (a household, a shared connection)


def _name(request) -> str:
    # The form signs in with the NFKC form of the name: look-alikes ("ａｌｉｃｅ") must count against the same account.
    return unicodedata.normalize("NFKC", str(request.POST.get("username", ""))).strip()[:150]


def _keys(request) -> list[tuple[str, int]]:
    limit = settings.LOREKEEPER_LOGIN_ATTEMPTS
    keys = [(f"signin:ip:{client_ip(request) or 'unknown'}", limit * ADDRESS_FACTOR)]
    if name := _name(request).casefold():
        keys.append((f"signin:user:{name}", limit))
    return keys


def _bump(key: str) -> int:
    window = settings.LOREKEEPER_LOGIN_WINDOW_SECONDS
    try:
        if cache.add(key, 1, timeout=window):
            return 1
        return int(cache.incr(key))
    except Exception as exc:  # noqa: BLE001 — no cache, no lock-out
        log.warning("sign-in attempts not counted (cache unavailable): %s", exc)
        return 0


def attempt_begin(request) -> bool:
    """Count this attempt; False if the account or the address has used up its attempts (the first refusal is
    audited: the moment the pause began)."""
    counts = [(_bump(key), limit) for key, limit in _keys(request)]
    if all(count <= limit for count, limit in counts):
        return True
    if any(count == limit + 1 for count, limit in counts):
        name = _name(request)
        user = get_user_model()._default_manager.filter(username=name).first() if name else None
        audit_record(action=AuditEvent.Action.LOGIN_LOCKED, user=user, target=name, ip=client_ip(request))
    return False


def attempt_succeeded(request) -> None:
    """A right password: the account's count starts again, and the address gets its attempt back."""
    (address, _), *account = _keys(request)
    try:
        for key, _ in account:
            cache.delete(key)
        cache.decr(address)
    except Exception:  # noqa: BLE001, S110 — nothing to take back without a cache (or the key expired)
        pass


def _signed_in(request, response: HttpResponse) -> bool:
    """This attempt signed in: a redirect, and the session's user is the one named (someone already signed in who
    posts another account's name with a wrong password gets the form again, and must not reset its count)."""
    user = request.user
    return (
        response.status_code == 302
        and user.is_authenticated
        and user.get_username().casefold() == _name(request).casefold()
    )


def _pause_message() -> str:
    minutes = max(1, settings.LOREKEEPER_LOGIN_WINDOW_SECONDS // 60)
    return f"Too many failed sign-ins: try again in {minutes} minutes."


def _paused(response: HttpResponse) -> HttpResponse:
    response.status_code = 429
    response["Retry-After"] = str(settings.LOREKEEPER_LOGIN_WINDOW_SECONDS)
    return response


class SignInView(auth_views.LoginView):
    def post(self, request, *args, **kwargs):
        if not attempt_begin(request):
            # Unbound, so the password is not even checked; cleaning it only readies the error list.
            form = self.get_form_class()(request=request, initial={"username": _name(request)})
            form.full_clean()
            form.cleaned_data = {}
            form.add_error(None, _pause_message())
            return _paused(self.render_to_response(self.get_context_data(form=form)))
        response = super().post(request, *args, **kwargs)
        if _signed_in(request, response):
            attempt_succeeded(request)
        return response


def admin_sign_in(request, extra_context=None):
    """The admin's sign-in (AdminSite.login), counted the same way: staff accounts are the ones worth guessing."""
    if request.method == "POST":
        if not attempt_begin(request):
            page = f"<!doctype html><title>Paused</title><h1>Sign-in paused</h1><p>{escape(_pause_message())}</p>"
            return _paused(HttpResponse(page))
    response = AdminSite.login(admin.site, request, extra_context)
    if request.method == "POST" and _signed_in(request, response):
        attempt_succeeded(request)
    return response
