from django.urls import path

from apps.lorebooks import views

app_name = "lorebooks"
urlpatterns = [
    path("lorebooks/", views.lorebook_list, name="list"),
    path("lorebooks/settings/", views.lore_settings_view, name="settings"),
    path("lorebooks/search/", views.lorebook_search_view, name="search"),
    path("lorebooks/from-memories/", views.memories_world_view, name="from-memories"),
    path("lorebooks/chats/<int:chat_id>/", views.chat_lore_view, name="chat-lore"),
    path("lorebooks/from-card/<int:character_id>/", views.card_book_import_view, name="from-card"),
    path("lorebooks/<int:lorebook_id>/", views.lorebook_detail, name="detail"),
    path("lorebooks/<int:lorebook_id>/change/", views.lorebook_change, name="change"),
    path("lorebooks/<int:lorebook_id>/delete/", views.lorebook_delete_view, name="delete"),
    path("lorebooks/<int:lorebook_id>/export/", views.lorebook_export_view, name="export"),
    path(
        "lorebooks/<int:lorebook_id>/revisions/<int:revision_id>/", views.revision_export_view, name="revision-export"
    ),
    path(
        "lorebooks/<int:lorebook_id>/revisions/<int:revision_id>/restore/",
        views.revision_restore_view,
        name="revision-restore",
    ),
    path("lorebooks/<int:lorebook_id>/entries/new/", views.entry_edit, name="entry-new"),
    path("lorebooks/<int:lorebook_id>/entries/<int:uid>/", views.entry_edit, name="entry"),
    path("lorebooks/<int:lorebook_id>/entries/<int:uid>/delete/", views.entry_delete_view, name="entry-delete"),
]
