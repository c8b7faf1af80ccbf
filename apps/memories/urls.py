from django.urls import path

from apps.memories.views import browser, charts, chat_search, entities, lifecycle, settings

app_name = "memories"

urlpatterns = [
    path("memories/", browser.memory_browser, name="list"),
    path("memories/growth/", charts.memory_growth_chart, name="growth"),
    path("memories/entities/", entities.entity_list, name="entities"),
    path("memories/entities/merge/", entities.entity_merge_view, name="entity-merge"),
    path("memories/entities/<int:entity_id>/", entities.entity_detail, name="entity"),
    path("memories/entities/<int:entity_id>/rename/", entities.entity_rename_view, name="entity-rename"),
    path("memories/settings/", settings.embedding_settings, name="settings"),
    path("memories/lifecycle/", lifecycle.lifecycle_page, name="lifecycle"),
    path("memories/lifecycle/jobs/", lifecycle.lifecycle_jobs, name="lifecycle-jobs"),
    path("memories/lifecycle/run/<int:character_id>/", lifecycle.hierarchy_run_view, name="hierarchy-run"),
    path("memories/<int:memory_id>/", browser.memory_detail, name="detail"),
    path("memories/<int:memory_id>/edit/", browser.memory_edit, name="edit"),
    path("memories/<int:memory_id>/retire/", browser.memory_retire_view, name="retire"),
    path("memories/<int:memory_id>/restore/", browser.memory_restore_view, name="restore"),
    path("characters/<int:character_id>/memories/", browser.memory_browser, name="character"),
    path("characters/<int:character_id>/memories/growth/", charts.memory_growth_chart, name="character-growth"),
    path("chats/<int:chat_id>/memories/", browser.memory_browser, name="chat"),
    path("chats/<int:chat_id>/memories/growth/", charts.memory_growth_chart, name="chat-growth"),
    path("chats/<int:chat_id>/memories/progress/", settings.chat_index_progress_view, name="chat-progress"),
    path("chats/<int:chat_id>/search/", chat_search.chat_search, name="chat-search"),
]
