from django.urls import path

from apps.sync.apis import instances, settings_document

urlpatterns = [
    path("settings", settings_document.SettingsApi.as_view(), name="settings"),
    path("sync/instances", instances.InstanceListApi.as_view(), name="sync-instances"),
    path("sync/instances/<str:key>", instances.InstanceDetailApi.as_view(), name="sync-instance"),
    path("sync/pull", instances.SyncPullApi.as_view(), name="sync-pull"),
    path("sync/push", instances.SyncPushApi.as_view(), name="sync-push"),
    path("sync/status", instances.SyncStatusApi.as_view(), name="sync-status"),
]
