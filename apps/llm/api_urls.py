from django.urls import path

from apps.llm import apis

urlpatterns = [
    path("llm/connections/", apis.ConnectionListApi.as_view(), name="llm-connection-list"),
    path("llm/connections/<int:connection_id>/", apis.ConnectionDetailApi.as_view(), name="llm-connection-detail"),
    path("llm/connections/<int:connection_id>/test", apis.ConnectionTestApi.as_view(), name="llm-connection-test"),
    path("llm/calls/", apis.CallListApi.as_view(), name="llm-call-list"),
    path("llm/presets/", apis.PresetListApi.as_view(), name="llm-preset-list"),
    path("llm/presets/<int:preset_id>/", apis.PresetDetailApi.as_view(), name="llm-preset-detail"),
]
