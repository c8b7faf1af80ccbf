from django.urls import path

from apps.sync.views import devices, settings_document

app_name = "sync"

urlpatterns = [
    path("settings/", settings_document.settings_document, name="settings"),
    path("devices/", devices.devices, name="devices"),
    path("devices/<str:key>/", devices.instance_change, name="instance"),
    path("devices/<str:key>/forget/", devices.instance_forget, name="instance-forget"),
]
