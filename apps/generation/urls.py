from django.urls import path

from apps.generation.views import chat

app_name = "generation"

urlpatterns = [
    path("chats/<int:chat_id>/composer/", chat.composer, name="composer"),
    path("chats/<int:chat_id>/messages/<int:index>/prompt/", chat.message_prompt, name="prompt"),
]
