from django.urls import path

from apps.generation import apis

urlpatterns = [
    path("chats/<int:chat_id>/generate", apis.ChatGenerateApi.as_view(), name="chat-generate"),
    path("chats/<int:chat_id>/messages/<int:index>/prompt", apis.MessagePromptApi.as_view(), name="message-prompt"),
]
