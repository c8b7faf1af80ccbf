from django.urls import path

from apps.chats import views

app_name = "chats"

urlpatterns = [
    path("", views.home, name="home"),
    path("welcome/", views.welcome, name="welcome"),
    path("chats/", views.chat_list, name="list"),
    path("chats/import/", views.chat_import_view, name="import"),
    path("chats/sample/", views.chat_sample, name="sample"),
    path("chats/<int:chat_id>/", views.chat_detail, name="detail"),
    path("chats/<int:chat_id>/older/", views.message_older, name="older"),
    path("chats/<int:chat_id>/messages/<int:index>/", views.message_fragment, name="message"),
    path("chats/<int:chat_id>/messages/<int:index>/swipes/", views.message_swipes, name="swipes"),
    path("chats/<int:chat_id>/export/", views.chat_export_view, name="export"),
    path("chats/<int:chat_id>/delete/", views.chat_delete_view, name="delete"),
    path(
        "chats/<int:chat_id>/revisions/<int:revision_id>/restore/",
        views.chat_revision_restore_view,
        name="revision-restore",
    ),
    path("characters/", views.character_list, name="characters"),
    path("characters/new/", views.character_detail, name="character-new"),
    path("characters/import/", views.character_import_view, name="character-import"),
    path("characters/<int:character_id>/", views.character_detail, name="character"),
    path("characters/<int:character_id>/delete/", views.character_delete_view, name="character-delete"),
]
