"""The Content-Security-Policy sent with every HTML page.

Message text is Markdown with raw HTML allowed, cleaned by nh3 (apps/chats/templatetags/chat_text.py). The policy is
the second wall behind it: a `<script>`, an `onerror=` or a `javascript:` link that ever got past the cleaner still
does not run, because the pages allow only scripts served by this site (`script-src 'self'`, no inline script, no
eval). The pages keep their behaviour in static/js/ and htmx is told not to evaluate attributes and not to inject its
indicator <style> (the htmx-config <meta> in templates/base.html; the indicator rules are in static/css/app.css),
so styles are the site's stylesheets only too.

Images: the site's own (avatars, icons) and data: URLs. An image a message links from another site is not loaded: it
would tell that site who reads the chat and when (docs/HARDENING.md).

A response that already carries a policy keeps it (an avatar is sent with `default-src 'none'`). Only HTML gets
this one: JSON, files and static assets are not documents a browser runs scripts in. Django's debug pages (DEBUG on,
404 and 500) carry inline scripts and styles and are left without it.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings

HEADER = "Content-Security-Policy"

POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    )
)


def _wants_policy(response) -> bool:
    if HEADER in response:
        return False
    if not response.get("Content-Type", "").startswith("text/html"):
        return False
    return not (settings.DEBUG and response.status_code in (404, 500))


def _with_policy(response):
    if _wants_policy(response):
        response[HEADER] = POLICY
    return response


class ContentSecurityPolicyMiddleware:
    """Adds POLICY to HTML responses; sync or async, as the stack it runs in (gunicorn's ASGI worker is async)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        return _with_policy(self.get_response(request))

    async def __acall__(self, request):
        return _with_policy(await self.get_response(request))
