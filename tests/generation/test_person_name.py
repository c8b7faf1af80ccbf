"""Who the person is, in a SillyTavern chat whose header says "unused" (its current header style): the name on
their messages, in the web chat's prompt, on the message it writes for them, and in what extraction tells the
model; a persona's name first."""

import io
import json

import pytest

from apps.chats.models import Chat, Message
from apps.chats.selectors import chat_person_name
from apps.chats.services.chats import chat_import
from apps.chats.services.personas import persona_create
from apps.extraction.services.tiers.base import JobContext

pytestmark = pytest.mark.django_db


@pytest.fixture
def unused_header(user):
    lines = [{"user_name": "unused", "character_name": "unused", "chat_metadata": {}}] + [
        {"name": name, "is_user": name == "Rowan", "is_system": False, "mes": text}
        for name, text in (("Mira", "Evening."), ("Rowan", "Any ships?"), ("Mira", "The Gull, at dawn."))
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    return chat_import(user=user, stream=io.BytesIO(data), title="Harbour")


def test_the_person_is_named_by_their_messages_not_sillytaverns_placeholder(api, user, unused_header, llm):
    chat = unused_header
    assert chat.user_name == "unused" and chat_person_name(chat=chat) == "Rowan"
    context = JobContext(None, chat, None, None, None, list(chat.characters.all()))
    assert context.speaker_names() == "Mira, Rowan (the user's character)"

    llm.server.on("And the storm?", "It passed.")
    url = f"/api/v1/chats/{chat.pk}/generate"
    assert api.post(url, {"message": "And the storm?", "stream": False}, format="json").status_code == 200
    sent = json.dumps(llm.server.requests[-1]["body"]["messages"])
    assert "between Mira and Rowan" in sent and "unused" not in sent
    assert Message.objects.get(chat=chat, index=3).name == "Rowan"


def test_a_persona_names_the_person_first(user, unused_header):
    ash = persona_create(user=user, name="Ash", description="A wanderer.")
    Chat.objects.filter(pk=unused_header.pk).update(persona=ash)
    assert chat_person_name(chat=Chat.objects.get(pk=unused_header.pk)) == "Ash"
