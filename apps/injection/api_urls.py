from django.urls import path

from apps.injection import apis

urlpatterns = [
    path("chats/<int:chat_id>/context", apis.ContextApi.as_view(), name="context"),
    path("chats/<int:chat_id>/messages/<int:index>/recall", apis.RecallApi.as_view(), name="recall"),
    path("chats/<int:chat_id>/messages/<int:index>/recall/rerun", apis.RecallRerunApi.as_view(), name="recall-rerun"),
    path("injection/settings", apis.InjectionSettingsApi.as_view(), name="injection-settings"),
]
