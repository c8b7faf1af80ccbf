import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import override_settings

from apps.accounts.models import ApiToken
from apps.common.exceptions import ApplicationError

pytestmark = pytest.mark.django_db


def test_signup_creates_an_account_and_lands_on_the_first_run_page(client):
    response = client.post(
        "/accounts/signup/",
        {"username": "carol", "email": "", "password1": "a long passphrase 42", "password2": "a long passphrase 42"},
    )
    assert response.status_code == 302 and response["Location"] == "/welcome/"
    assert get_user_model().objects.filter(username="carol").exists()
    assert client.get("/").url == "/welcome/"


def test_signup_form_errors_are_shown(client):
    response = client.post("/accounts/signup/", {"username": "carol", "password1": "x", "password2": "y"})
    assert response.status_code == 200 and "didn’t match" in response.content.decode()


@override_settings(LOREKEEPER_SIGNUP_OPEN=False)
def test_signup_can_be_switched_off(client):
    assert client.get("/accounts/signup/").status_code == 404
    assert "Sign up" not in client.get("/accounts/login/").content.decode()


def test_sign_in_and_out(client, user):
    response = client.post("/accounts/login/", {"username": "alice", "password": "correct horse battery"})
    assert response.status_code == 302
    assert client.get("/chats/").status_code == 200
    client.post("/accounts/logout/")
    assert client.get("/chats/").status_code == 302


def test_password_change(web, user):
    response = web.post(
        "/accounts/password_change/",
        {
            "old_password": "correct horse battery",
            "new_password1": "another long one 7",
            "new_password2": "another long one 7",
        },
    )
    assert response.status_code == 302
    user.refresh_from_db()
    assert user.check_password("another long one 7")


def test_password_reset_sends_a_link_that_works(client, user):
    client.post("/accounts/password_reset/", {"email": "a@x.test"})
    assert len(mail.outbox) == 1
    link = re.search(r"https?://[^/]+(/accounts/reset/\S+)", mail.outbox[0].body).group(1)
    form_page = client.get(link, follow=True)
    assert form_page.status_code == 200
    response = client.post(
        form_page.redirect_chain[-1][0], {"new_password1": "fresh pass 1234", "new_password2": "fresh pass 1234"}
    )
    assert response.status_code == 302
    user.refresh_from_db()
    assert user.check_password("fresh pass 1234")


def test_token_page_creates_shows_once_and_revokes(web, user):
    response = web.post("/accounts/tokens/", {"name": "SillyTavern"}, HTTP_HX_REQUEST="true")
    raw = re.search(r'data-testid="new-token">(lk_[^<]+)<', response.content.decode()).group(1)
    assert "<html" not in response.content.decode()  # the htmx branch answers the fragment
    token = ApiToken.objects.get(user=user)
    assert raw not in web.get("/accounts/tokens/").content.decode()
    response = web.post(f"/accounts/tokens/{token.pk}/revoke/", HTTP_HX_REQUEST="true")
    assert "revoked" in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_revoking_another_users_token_is_404(web, other_user):
    from apps.accounts.services import api_token_create

    token, _ = api_token_create(user=other_user, name="theirs")
    assert web.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_token_page_lists_only_own_tokens(web, other_user):
    from apps.accounts.services import api_token_create

    api_token_create(user=other_user, name="bobs secret laptop")
    assert "bobs secret laptop" not in web.get("/accounts/tokens/").content.decode()


def test_tokens_in_use_are_capped_and_old_revoked_ones_only_counted(web, user):
    """A person (or a script signed in as them) making tokens without end: the ones in use stop at the cap with the
    reason on the form, and the page lists the revoked ones last revoked first, the older only counted."""
    from django.utils import timezone

    from apps.accounts.selectors import REVOKED_SHOWN
    from apps.accounts.services import MAX_ACTIVE_TOKENS, api_token_create

    for n in range(MAX_ACTIVE_TOKENS):
        api_token_create(user=user, name=f"device {n}")
    with pytest.raises(ApplicationError):
        api_token_create(user=user, name="one more")
    page = web.post("/accounts/tokens/", {"name": "one more"}).content.decode()
    assert "the most there can be" in page and ApiToken.objects.filter(user=user).count() == MAX_ACTIVE_TOKENS
    ApiToken.objects.filter(user=user).update(revoked_at=timezone.now())
    for n in range(REVOKED_SHOWN + 3):
        api_token_create(user=user, name=f"again {n}")
    ApiToken.objects.filter(user=user, name__startswith="again").update(revoked_at=timezone.now())
    api_token_create(user=user, name="in use")
    page = web.get("/accounts/tokens/").content.decode()
    assert page.count('<tr id="token-') == 1 + REVOKED_SHOWN and "in use" in page
    assert f"{MAX_ACTIVE_TOKENS + 3} tokens revoked" in page
