from django.urls import path

from apps.extraction.apis import legacy, pipeline, settings, story

urlpatterns = [
    path("chats/<int:chat_id>/pipeline", pipeline.PipelineDetailApi.as_view(), name="pipeline-detail"),
    path("chats/<int:chat_id>/pipeline/pause", pipeline.PipelinePauseApi.as_view(), name="pipeline-pause"),
    path("chats/<int:chat_id>/pipeline/resume", pipeline.PipelineResumeApi.as_view(), name="pipeline-resume"),
    path("chats/<int:chat_id>/pipeline/rebuild", pipeline.PipelineRebuildApi.as_view(), name="pipeline-rebuild"),
    path("chats/<int:chat_id>/pipeline/run", pipeline.PipelineRunApi.as_view(), name="pipeline-run"),
    path("chats/<int:chat_id>/pipeline/jobs/", pipeline.PipelineJobListApi.as_view(), name="pipeline-job-list"),
    path("chats/<int:chat_id>/scenes/", story.SceneListApi.as_view(), name="scene-list"),
    path("chats/<int:chat_id>/scenes/<int:scene_id>/", story.SceneDetailApi.as_view(), name="scene-detail"),
    path("chats/<int:chat_id>/scenes/<int:scene_id>/recap", story.SceneRecapApi.as_view(), name="scene-recap"),
    path("chats/<int:chat_id>/continuity/", story.ContinuityListApi.as_view(), name="continuity-list"),
    path("chats/<int:chat_id>/recap", story.RecapApi.as_view(), name="recap"),
    path("chats/<int:chat_id>/recap/<int:recap_id>/dismiss", story.RecapDismissApi.as_view(), name="recap-dismiss"),
    path("chats/<int:chat_id>/legacy-import", legacy.ChatLegacyImportApi.as_view(), name="chat-legacy-import"),
    path("extraction/jobs/<int:job_id>/", pipeline.PipelineJobDetailApi.as_view(), name="pipeline-job-detail"),
    path("extraction/jobs/<int:job_id>/retry", pipeline.PipelineJobRetryApi.as_view(), name="pipeline-job-retry"),
    path("extraction/settings", settings.ExtractionSettingsApi.as_view(), name="extraction-settings"),
    path("extraction/model-tests/", settings.ModelTestListApi.as_view(), name="model-test-list"),
    path("extraction/model-tests/<int:test_id>/", settings.ModelTestDetailApi.as_view(), name="model-test-detail"),
]
