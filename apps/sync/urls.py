from django.urls import path

from apps.sync import views

app_name = "sync"

urlpatterns = [
    path("settings/", views.settings_document, name="settings"),
]
