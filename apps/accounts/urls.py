from django.urls import include, path

from apps.accounts import views

app_name = "accounts"

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("tokens/", views.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
]

# Django's own sign-in, sign-out, password change and reset views, with our templates in templates/registration/.
auth_urlpatterns = [path("", include("django.contrib.auth.urls"))]
