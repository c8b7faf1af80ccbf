import factory

from apps.chats.models import Character, Chat, Message


class CharacterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Character

    name = factory.Sequence(lambda n: f"Character {n}")
    description = "A test character."


class ChatFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Chat

    title = factory.Sequence(lambda n: f"Chat {n}")
    user_name = "You"
    character_name = "Aqua"


def add_messages(chat: Chat, count: int) -> list[Message]:
    start = chat.message_count
    messages = Message.objects.bulk_create(
        Message(
            chat=chat,
            index=start + i,
            name="You" if i % 2 else "Aqua",
            is_user=bool(i % 2),
            mes=f"message {start + i}",
        )
        for i in range(count)
    )
    chat.message_count = start + count
    chat.save(update_fields=["message_count"])
    return messages
