from django.urls import path

from apps.llm import views

app_name = "llm"
urlpatterns = [
    path("llm/", views.connection_list, name="connections"),
    path("llm/calls/", views.call_list, name="calls"),
    path("llm/<int:connection_id>/", views.connection_edit, name="edit"),
    path("llm/<int:connection_id>/test/", views.connection_test_view, name="test"),
    path("llm/<int:connection_id>/delete/", views.connection_delete_view, name="delete"),
]
