from django.urls import path

from apps.extraction.views import legacy, pipeline, settings, story

app_name = "extraction"

urlpatterns = [
    path("chats/<int:chat_id>/pipeline/", pipeline.pipeline_panel, name="panel"),
    path("chats/<int:chat_id>/pipeline/pause/", pipeline.pipeline_pause_view, name="pause"),
    path("chats/<int:chat_id>/pipeline/resume/", pipeline.pipeline_resume_view, name="resume"),
    path("chats/<int:chat_id>/pipeline/rebuild/", pipeline.pipeline_rebuild_view, name="rebuild"),
    path("chats/<int:chat_id>/pipeline/run/", pipeline.pipeline_run_view, name="run"),
    path("chats/<int:chat_id>/pipeline/consent/", pipeline.pipeline_consent_view, name="consent"),
    path("chats/<int:chat_id>/pipeline/jobs/<int:job_id>/retry/", pipeline.job_retry_view, name="retry"),
    path("chats/<int:chat_id>/recap/", story.recap_panel, name="recap"),
    path("chats/<int:chat_id>/recap/<int:recap_id>/dismiss/", story.recap_dismiss_view, name="recap-dismiss"),
    path("chats/<int:chat_id>/story/", story.story_page, name="story"),
    path("chats/<int:chat_id>/scenes/<int:scene_id>/", story.scene_update_view, name="scene"),
    path("chats/<int:chat_id>/scenes/<int:scene_id>/recap/", story.scene_recap_view, name="scene-recap"),
    path("chats/<int:chat_id>/legacy-import/", legacy.legacy_import, name="legacy-import"),
    path("extraction/settings/", settings.settings_page, name="settings"),
    path("llm/<int:connection_id>/model-test/", settings.model_test_page, name="model-test"),
    path("llm/model-tests/<int:test_id>/", settings.model_test_results, name="model-test-results"),
]
