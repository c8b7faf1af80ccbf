from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from apps.accounts.audit import client_ip
from apps.accounts.forms import ApiTokenForm, SignupForm
from apps.accounts.models import ApiToken
from apps.accounts.selectors import api_token_list, api_tokens_revoked_count
from apps.accounts.services import api_token_create, api_token_revoke, user_signup
from apps.common.exceptions import ApplicationError
from apps.common.forms import posted


@require_http_methods(["GET", "POST"])
def signup(request):
    if not settings.LOREKEEPER_SIGNUP_OPEN:
        raise Http404("Sign-up is closed on this server.")
    if request.user.is_authenticated:
        return redirect("chats:home")
    form = SignupForm(posted(request))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        user = user_signup(username=data["username"], email=data["email"], password=data["password1"])
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("chats:welcome")
    return render(request, "accounts/signup.html", {"form": form})


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def token_list(request):
    form = ApiTokenForm(posted(request))
    new_token = None
    if request.method == "POST" and form.is_valid():
        try:
            _, new_token = api_token_create(user=request.user, name=form.cleaned_data["name"], ip=client_ip(request))
            form = ApiTokenForm()
        except ApplicationError as exc:  # the most tokens in use
            form.add_error("name", exc.message)
    revoked = api_tokens_revoked_count(user=request.user)
    tokens = api_token_list(user=request.user)
    context = {
        "tokens": tokens,
        "revoked_hidden": revoked - sum(token.revoked_at is not None for token in tokens),
        "form": form,
        "new_token": new_token,
    }
    template = "accounts/token_list.html#token-panel" if request.htmx else "accounts/token_list.html"
    return render(request, template, context)


@login_required
@require_POST
def token_revoke(request, token_id: int):
    try:
        token = api_token_revoke(user=request.user, token_id=token_id, ip=client_ip(request))
    except ApiToken.DoesNotExist as exc:
        raise Http404 from exc
    if request.htmx:
        return render(request, "accounts/token_list.html#token-row", {"token": token})
    messages.success(request, f"Token “{token.name}” revoked.")
    return redirect("accounts:tokens")
