"""The OpenAI-compatible gateway, at the site root: a front end given the base URL `https://host/v1` appends
`/models` and `/chat/completions` itself (docs/GATEWAY.md)."""

from django.urls import path

from apps.gateway import apis

app_name = "gateway"
urlpatterns = [
    path("v1/models", apis.ModelListApi.as_view(), name="models"),
    path("v1/models/<path:model>", apis.ModelGetApi.as_view(), name="model"),
    path("v1/chat/completions", apis.ChatCompletionApi.as_view(), name="chat-completions"),
]
