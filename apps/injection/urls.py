from django.urls import path

from apps.injection.views import context, recall

app_name = "injection"

urlpatterns = [
    path("memories/injection/", context.settings_page, name="settings"),
    path("chats/<int:chat_id>/context/", context.context_page, name="context"),
    path("chats/<int:chat_id>/messages/<int:index>/recall/", recall.recall_card, name="recall"),
    path("chats/<int:chat_id>/messages/<int:index>/recall/edit/", recall.recall_edit_view, name="recall-edit"),
    path("chats/<int:chat_id>/messages/<int:index>/recall/delete/", recall.recall_delete_view, name="recall-delete"),
    path("chats/<int:chat_id>/messages/<int:index>/recall/rerun/", recall.recall_rerun_view, name="recall-rerun"),
    path("chats/<int:chat_id>/messages/<int:index>/recall/graph/", recall.recall_graph, name="recall-graph"),
    path(
        "chats/<int:chat_id>/messages/<int:index>/recall/graph/<str:node>/",
        recall.recall_node,
        name="recall-node",
    ),
]
