from django.urls import path

from apps.sync import apis

urlpatterns = [
    path("chats/<int:chat_id>/append", apis.ChatAppendApi.as_view(), name="chat-append"),
    path("chats/<int:chat_id>/patch", apis.ChatPatchApi.as_view(), name="chat-patch"),
    path("chats/<int:chat_id>/metadata", apis.ChatMetadataApi.as_view(), name="chat-metadata"),
    path("chats/<int:chat_id>/delta", apis.ChatDeltaApi.as_view(), name="chat-delta"),
    path("chats/<int:chat_id>/save", apis.ChatSaveApi.as_view(), name="chat-save"),
    path("chats/<int:chat_id>/revisions/", apis.ChatRevisionListApi.as_view(), name="chat-revisions"),
    path(
        "chats/<int:chat_id>/revisions/<int:revision_id>/export",
        apis.ChatRevisionExportApi.as_view(),
        name="chat-revision-export",
    ),
    path(
        "chats/<int:chat_id>/revisions/<int:revision_id>/restore",
        apis.ChatRevisionRestoreApi.as_view(),
        name="chat-revision-restore",
    ),
    path(
        "chats/<int:chat_id>/messages/<int:index>/data/<str:namespace>",
        apis.MessageExtensionDataApi.as_view(),
        name="message-data",
    ),
    path("settings", apis.SettingsApi.as_view(), name="settings"),
]
