from django.urls import path

from apps.memories.apis import entities, lifecycle, memories, search

urlpatterns = [
    path("memories/", memories.MemoryListApi.as_view(), name="memory-list"),
    path("memories/search", search.MemorySearchApi.as_view(), name="memory-search"),
    path("memories/count", memories.MemoryCountApi.as_view(), name="memory-count"),
    path("memories/submit", lifecycle.MemorySubmitApi.as_view(), name="memory-submit"),
    path("memories/hierarchy", lifecycle.HierarchyRunApi.as_view(), name="memory-hierarchy"),
    path("memories/consolidate", lifecycle.ConsolidationRunApi.as_view(), name="memory-consolidate"),
    path("memories/lifecycle/settings", lifecycle.LifecycleSettingsApi.as_view(), name="lifecycle-settings"),
    path("memories/lifecycle/jobs/", lifecycle.LifecycleJobListApi.as_view(), name="lifecycle-job-list"),
    path("memories/lifecycle/jobs/<int:job_id>/", lifecycle.LifecycleJobDetailApi.as_view(), name="lifecycle-job"),
    path("memories/<int:memory_id>/", memories.MemoryDetailApi.as_view(), name="memory-detail"),
    path("memories/<int:memory_id>/history", memories.MemoryHistoryApi.as_view(), name="memory-history"),
    path("memories/<int:memory_id>/decisions", lifecycle.MemoryDecisionsApi.as_view(), name="memory-decisions"),
    path("entities/", entities.EntityListApi.as_view(), name="entity-list"),
    path("entities/<int:entity_id>/", entities.EntityDetailApi.as_view(), name="entity-detail"),
    path("entities/<int:entity_id>/merge/", entities.EntityMergeApi.as_view(), name="entity-merge"),
    path("embeddings/settings", entities.EmbeddingSettingsApi.as_view(), name="embedding-settings"),
]
