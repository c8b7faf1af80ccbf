from django.urls import path

from apps.memories import apis

urlpatterns = [
    path("memories/", apis.MemoryListApi.as_view(), name="memory-list"),
    path("memories/search", apis.MemorySearchApi.as_view(), name="memory-search"),
    path("memories/<int:memory_id>/", apis.MemoryDetailApi.as_view(), name="memory-detail"),
    path("memories/<int:memory_id>/history", apis.MemoryHistoryApi.as_view(), name="memory-history"),
    path("entities/", apis.EntityListApi.as_view(), name="entity-list"),
    path("entities/<int:entity_id>/", apis.EntityDetailApi.as_view(), name="entity-detail"),
    path("embeddings/settings", apis.EmbeddingSettingsApi.as_view(), name="embedding-settings"),
]
