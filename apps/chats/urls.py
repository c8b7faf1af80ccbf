from django.urls import path

from apps.chats.views import characters, chats, personas, start

app_name = "chats"

urlpatterns = [
    path("", chats.home, name="home"),
    path("welcome/", chats.welcome, name="welcome"),
    path("chats/", chats.chat_list, name="list"),
    path("chats/import/", chats.chat_import_view, name="import"),
    path("chats/sample/", chats.chat_sample, name="sample"),
    path("chats/<int:chat_id>/", chats.chat_detail, name="detail"),
    path("chats/<int:chat_id>/older/", chats.message_older, name="older"),
    path("chats/<int:chat_id>/newer/", chats.message_newer, name="newer"),
    path("chats/<int:chat_id>/messages/<int:index>/", chats.message_fragment, name="message"),
    path("chats/<int:chat_id>/messages/<int:index>/swipes/", chats.message_swipes, name="swipes"),
    path("chats/<int:chat_id>/export/", chats.chat_export_view, name="export"),
    path("chats/<int:chat_id>/delete/", chats.chat_delete_view, name="delete"),
    path("chats/<int:chat_id>/branch/", start.chat_branch_view, name="branch"),
    path("chats/<int:chat_id>/persona/", start.chat_persona, name="chat-persona"),
    path("chats/<int:chat_id>/reply-order/", start.chat_reply_order, name="chat-reply-order"),
    path(
        "chats/<int:chat_id>/revisions/<int:revision_id>/restore/",
        chats.chat_revision_restore_view,
        name="revision-restore",
    ),
    path("characters/", characters.character_list, name="characters"),
    path("characters/new/", characters.character_detail, name="character-new"),
    path("characters/import/", characters.character_import_view, name="character-import"),
    path("characters/group-chat/", start.group_chat_start, name="group-chat-start"),
    path("characters/<int:character_id>/", characters.character_detail, name="character"),
    path("characters/<int:character_id>/avatar", characters.character_avatar, name="character-avatar"),
    path("characters/<int:character_id>/chats/new/", start.character_chat_start, name="character-chat-start"),
    path("characters/<int:character_id>/delete/", characters.character_delete_view, name="character-delete"),
    path("personas/", personas.persona_list, name="personas"),
    path("personas/<int:persona_id>/", personas.persona_detail, name="persona"),
    path("personas/<int:persona_id>/default/", personas.persona_default_view, name="persona-default"),
    path("personas/<int:persona_id>/delete/", personas.persona_delete_view, name="persona-delete"),
]
