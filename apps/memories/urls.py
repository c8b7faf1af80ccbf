from django.urls import path

from apps.memories import views

app_name = "memories"

urlpatterns = [
    path("memories/", views.memory_browser, name="list"),
    path("memories/entities/", views.entity_list, name="entities"),
    path("memories/entities/<int:entity_id>/", views.entity_detail, name="entity"),
    path("memories/settings/", views.embedding_settings, name="settings"),
    path("memories/<int:memory_id>/", views.memory_detail, name="detail"),
    path("memories/<int:memory_id>/edit/", views.memory_edit, name="edit"),
    path("memories/<int:memory_id>/retire/", views.memory_retire_view, name="retire"),
    path("memories/<int:memory_id>/restore/", views.memory_restore_view, name="restore"),
    path("characters/<int:character_id>/memories/", views.memory_browser, name="character"),
    path("chats/<int:chat_id>/memories/", views.memory_browser, name="chat"),
    path("chats/<int:chat_id>/memories/progress/", views.chat_index_progress_view, name="chat-progress"),
]
