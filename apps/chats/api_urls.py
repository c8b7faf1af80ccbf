from django.urls import path

from apps.chats import apis

urlpatterns = [
    path("characters/", apis.CharacterListApi.as_view(), name="character-list"),
    path("characters/import", apis.CharacterImportApi.as_view(), name="character-import"),
    path("characters/<int:character_id>/", apis.CharacterDetailApi.as_view(), name="character-detail"),
    path("chats/", apis.ChatListApi.as_view(), name="chat-list"),
    path("chats/import", apis.ChatImportApi.as_view(), name="chat-import"),
    path("chats/<int:chat_id>/", apis.ChatDetailApi.as_view(), name="chat-detail"),
    path("chats/<int:chat_id>/export", apis.ChatExportApi.as_view(), name="chat-export"),
    path("chats/<int:chat_id>/messages/", apis.MessageListApi.as_view(), name="message-list"),
    path("chats/<int:chat_id>/messages/<int:index>/", apis.MessageDetailApi.as_view(), name="message-detail"),
]
