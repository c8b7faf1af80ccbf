from django.urls import path

from apps.llm import views

app_name = "llm"
urlpatterns = [
    path("llm/", views.connection_list, name="connections"),
    path("llm/calls/", views.call_list, name="calls"),
    path("llm/usage/", views.usage_chart, name="usage"),
    path("llm/<int:connection_id>/", views.connection_edit, name="edit"),
    path("llm/<int:connection_id>/test/", views.connection_test_view, name="test"),
    path("llm/<int:connection_id>/delete/", views.connection_delete_view, name="delete"),
    path("llm/<int:connection_id>/presets/save/", views.preset_save_view, name="preset-save"),
    path("llm/<int:connection_id>/presets/apply/", views.preset_apply_view, name="preset-apply"),
    path("llm/<int:connection_id>/presets/<int:preset_id>/delete/", views.preset_delete_view, name="preset-delete"),
]
