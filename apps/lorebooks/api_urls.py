from django.urls import path

from apps.lorebooks import apis

urlpatterns = [
    path("lorebooks/", apis.LorebookListApi.as_view(), name="lorebook-list"),
    path("chats/<int:chat_id>/lorebooks", apis.ChatLorebooksApi.as_view(), name="chat-lorebooks"),
    path("lorebooks/from-memories", apis.MemoriesWorldApi.as_view(), name="lorebook-from-memories"),
    path("lorebooks/<int:lorebook_id>/", apis.LorebookDetailApi.as_view(), name="lorebook-detail"),
    path("lorebooks/<int:lorebook_id>/export", apis.LorebookExportApi.as_view(), name="lorebook-export"),
    path("lorebooks/<int:lorebook_id>/revisions/", apis.LorebookRevisionListApi.as_view(), name="lorebook-revisions"),
    path(
        "lorebooks/<int:lorebook_id>/revisions/<int:revision_id>/export",
        apis.LorebookRevisionExportApi.as_view(),
        name="lorebook-revision-export",
    ),
    path(
        "lorebooks/<int:lorebook_id>/revisions/<int:revision_id>/restore",
        apis.LorebookRevisionRestoreApi.as_view(),
        name="lorebook-revision-restore",
    ),
]
