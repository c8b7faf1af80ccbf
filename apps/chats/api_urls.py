from django.urls import path

from apps.chats.apis import characters, chats, messages

urlpatterns = [
    path("characters/", characters.CharacterListApi.as_view(), name="character-list"),
    path("characters/import", characters.CharacterImportApi.as_view(), name="character-import"),
    path("characters/<int:character_id>/", characters.CharacterDetailApi.as_view(), name="character-detail"),
    path("chats/", chats.ChatListApi.as_view(), name="chat-list"),
    path("chats/import", chats.ChatImportApi.as_view(), name="chat-import"),
    path("chats/<int:chat_id>/", chats.ChatDetailApi.as_view(), name="chat-detail"),
    path("chats/<int:chat_id>/export", chats.ChatExportApi.as_view(), name="chat-export"),
    path("chats/<int:chat_id>/messages/", messages.MessageListApi.as_view(), name="message-list"),
    path("chats/<int:chat_id>/messages/<int:index>/", messages.MessageDetailApi.as_view(), name="message-detail"),
]
