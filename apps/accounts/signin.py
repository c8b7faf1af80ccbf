"""Sign-in with a pause after repeated attempts, and password-reset mail with a limit.

Sign-in: LOREKEEPER_LOGIN_ATTEMPTS failed attempts at one account from one address (or five times that from one
address at any accounts) within LOREKEEPER_LOGIN_WINDOW_SECONDS, and further attempts from that address are refused
with 429, without checking the password, until the window passes. An account's attempts are counted per address,
and an address already paused counts against no account: one address can pause only itself, never an account for
everybody (the default "admin" included). Both the site's sign-in and the admin's count.

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
from django.shortcuts import redirect
from django.utils.html import escape

from apps.accounts.audit import audit_record, client_ip
from apps.accounts.models import AuditEvent

log = logging.getLogger(__name__)
ADDRESS_FACTOR = 5  # an address may try several accounts (a household, a shared connection)
RESET_WINDOW_SECONDS = 60 * 60


def _name(request) -> str:
    # The form signs in with the NFKC form of the name: look-alikes ("ａｌｉｃｅ") must count against the same account.
    return unicodedata.normalize("NFKC", str(request.POST.get("username", ""))).strip()[:150]


def _address(request) -> str:
    return client_ip(request) or "unknown"


def _address_key(request) -> str:
    return f"signin:ip:{_address(request)}"


def _account_key(request) -> str | None:
    name = _name(request).casefold()
    return f"signin:user:{name}:ip:{_address(request)}" if name else None


def count_attempt(key: str, window: int) -> int:
    """This attempt's number in the window (1 for the first); 0 when nothing can be counted (no cache: nobody is
    locked out)."""
    try:
        if cache.add(key, 1, timeout=window):
            return 1
        return int(cache.incr(key))
    except Exception as exc:  # noqa: BLE001 — no cache, no lock-out
        log.warning("attempts not counted (cache unavailable): %s", exc)
        return 0


def attempt_begin(request) -> bool:
    """Count this attempt; False if the address, or this account from this address, has used up its attempts (the
    first refusal is audited: the moment the pause began). A paused address counts against no account."""
    limit, window = settings.LOREKEEPER_LOGIN_ATTEMPTS, settings.LOREKEEPER_LOGIN_WINDOW_SECONDS
    counts = [(count_attempt(_address_key(request), window), limit * ADDRESS_FACTOR)]
    account_key = _account_key(request)
    if account_key and counts[0][0] <= counts[0][1]:
        counts.append((count_attempt(account_key, window), limit))
    if all(count <= most for count, most in counts):
        return True
    if any(count == most + 1 for count, most in counts):
        name = _name(request)
        user = get_user_model()._default_manager.filter(username=name).first() if name else None
        audit_record(action=AuditEvent.Action.LOGIN_LOCKED, user=user, target=name, ip=client_ip(request))
    return False


def attempt_succeeded(request) -> None:
    """A right password: the account's count from this address starts again, and the address gets its attempt
    back."""
    try:
        if account_key := _account_key(request):
            cache.delete(account_key)
        cache.decr(_address_key(request))
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


class PasswordResetView(auth_views.PasswordResetView):
    """Django's reset form, with a limit on the mail it sends: LOREKEEPER_PASSWORD_RESET_PER_ADDRESS requests an
    hour from one address (then 429), and LOREKEEPER_PASSWORD_RESET_PER_ACCOUNT mails an hour to one address of
    mail. Past the second limit the answer is the usual "sent if it exists" page and nothing is sent, counted
    whether or not an account has that address, so the answer tells nothing about which accounts exist."""

    def post(self, request, *args, **kwargs):
        per_address = count_attempt(f"reset:ip:{_address(request)}", RESET_WINDOW_SECONDS)
        if per_address > settings.LOREKEEPER_PASSWORD_RESET_PER_ADDRESS:
            form = self.get_form()
            form.is_valid()
            form.add_error(None, "Too many password reset requests from here: try again in an hour.")
            response = self.render_to_response(self.get_context_data(form=form))
            response.status_code = 429
            response["Retry-After"] = str(RESET_WINDOW_SECONDS)
            return response
        email = unicodedata.normalize("NFKC", str(request.POST.get("email", ""))).strip().casefold()[:254]
        if email and count_attempt(f"reset:email:{email}", RESET_WINDOW_SECONDS) > (
            settings.LOREKEEPER_PASSWORD_RESET_PER_ACCOUNT
        ):
            form = self.get_form()
            if form.is_valid():
                log.info("password reset mail not sent: the hourly limit for that address is reached")
                return redirect(self.get_success_url())
            return self.form_invalid(form)
        return super().post(request, *args, **kwargs)
