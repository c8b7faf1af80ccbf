from django.contrib.auth import urls as django_auth_urls
from django.urls import path

from apps.accounts import views
from apps.accounts.signin import PasswordResetView, SignInView

app_name = "accounts"

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("tokens/", views.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
]

# Django's own sign-out, password change and reset views, with our templates in templates/registration/; sign-in
# is Django's too, with a pause after repeated failures, and so is the reset form, with a limit on the mail it sends.
auth_urlpatterns = [
    path("login/", SignInView.as_view(), name="login"),
    path("password_reset/", PasswordResetView.as_view(), name="password_reset"),
    *[p for p in django_auth_urls.urlpatterns if p.name not in ("login", "password_reset")],
]
