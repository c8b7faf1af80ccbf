from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from apps.accounts.urls import auth_urlpatterns

api_urlpatterns = [
    path("", include("apps.chats.api_urls")),
    path("", include("apps.sync.api_urls")),
    path("", include("apps.memories.api_urls")),
    path("", include("apps.llm.api_urls")),
    path("", include("apps.extraction.api_urls")),
    path("", include("apps.lorebooks.api_urls")),
    path("", include("apps.injection.api_urls")),
    path("", include("apps.generation.api_urls")),
    path("", include("apps.archives.api_urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file of its own: the pages' Content-Security-Policy
    # (apps/common/csp.py) refuses inline scripts.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include((api_urlpatterns, "api"))),
    path("accounts/", include(auth_urlpatterns)),
    path("accounts/", include("apps.accounts.urls")),
    path("", include("apps.sync.urls")),
    path("", include("apps.memories.urls")),
    path("", include("apps.llm.urls")),
    path("", include("apps.extraction.urls")),
    path("", include("apps.lorebooks.urls")),
    path("", include("apps.injection.urls")),
    path("", include("apps.generation.urls")),
    path("", include("apps.gateway.urls")),  # /v1/models, /v1/chat/completions: OpenAI's paths, at the root
    path("", include("apps.archives.urls")),
    path("", include("apps.chats.urls")),
]

handler400 = "apps.common.views_errors.bad_request"
handler403 = "apps.common.views_errors.permission_denied"
handler404 = "apps.common.views_errors.page_not_found"
handler500 = "apps.common.views.server_error"
