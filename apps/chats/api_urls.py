from django.urls import path

from apps.chats.apis import cards, characters, chats, data, messages, personas, save, start, writes

urlpatterns = [
    path("characters/", characters.CharacterListApi.as_view(), name="character-list"),
    path("characters/import", characters.CharacterImportApi.as_view(), name="character-import"),
    path("characters/<int:character_id>/", characters.CharacterDetailApi.as_view(), name="character-detail"),
    path("characters/<int:character_id>/card.png", cards.CharacterCardPngApi.as_view(), name="character-card-png"),
    path("characters/<int:character_id>/card.json", cards.CharacterCardJsonApi.as_view(), name="character-card-json"),
    path("characters/<int:character_id>/chats", start.CharacterChatStartApi.as_view(), name="character-chat-start"),
    path("personas/", personas.PersonaListApi.as_view(), name="persona-list"),
    path("personas/<int:persona_id>", personas.PersonaDetailApi.as_view(), name="persona-detail"),
    path("chats/", chats.ChatListApi.as_view(), name="chat-list"),
    path("chats/import", chats.ChatImportApi.as_view(), name="chat-import"),
    path("chats/<int:chat_id>/", chats.ChatDetailApi.as_view(), name="chat-detail"),
    path("chats/<int:chat_id>/export", chats.ChatExportApi.as_view(), name="chat-export"),
    path("chats/<int:chat_id>/branch", start.ChatBranchApi.as_view(), name="chat-branch"),
    path("chats/<int:chat_id>/messages/", messages.MessageListApi.as_view(), name="message-list"),
    path("chats/<int:chat_id>/messages/<int:index>/", messages.MessageDetailApi.as_view(), name="message-detail"),
    path("chats/<int:chat_id>/append", writes.ChatAppendApi.as_view(), name="chat-append"),
    path("chats/<int:chat_id>/patch", writes.ChatPatchApi.as_view(), name="chat-patch"),
    path("chats/<int:chat_id>/metadata", writes.ChatMetadataApi.as_view(), name="chat-metadata"),
    path("chats/<int:chat_id>/delta", writes.ChatDeltaApi.as_view(), name="chat-delta"),
    path("chats/<int:chat_id>/save", save.ChatSaveApi.as_view(), name="chat-save"),
    path("chats/<int:chat_id>/revisions/", save.ChatRevisionListApi.as_view(), name="chat-revisions"),
    path(
        "chats/<int:chat_id>/revisions/<int:revision_id>/export",
        save.ChatRevisionExportApi.as_view(),
        name="chat-revision-export",
    ),
    path(
        "chats/<int:chat_id>/revisions/<int:revision_id>/restore",
        save.ChatRevisionRestoreApi.as_view(),
        name="chat-revision-restore",
    ),
    path(
        "chats/<int:chat_id>/messages/<int:index>/data/<str:namespace>",
        data.MessageExtensionDataApi.as_view(),
        name="message-data",
    ),
]
