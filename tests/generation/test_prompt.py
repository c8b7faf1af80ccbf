"""The prompt of a reply: the card, the in-prompt slots after it, the examples, the history newest first until the
budget is spent, the in-chat slots at their depths with their role, the post-history instructions and the mode's
nudge; macros resolved everywhere."""

import pytest

from apps.chats.services.characters import character_update
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.generation.services.prompt import CONTINUE_NUDGE, DEFAULT_SYSTEM, Speakers, memory_placed, prompt_build
from apps.llm.tokens import count_tokens
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db


class Estimate:
    """The estimate every connection falls back to, as a tokenizer."""

    name, exact = "estimate", False

    def count(self, text: str) -> int:
        return count_tokens(text)

    def count_messages(self, messages) -> int:
        return sum(count_tokens(m["content"]) + 4 for m in messages)


def slot(name, text, position, depth=0, role="system", enabled=True):
    return {"name": name, "text": text, "position": position, "depth": depth, "role": role, "enabled": enabled}


@pytest.fixture
def card(user):
    return CharacterFactory(
        user=user,
        name="Mira",
        system_prompt="You are {{char}}, talking with {{user}}.",
        description="{{char}} keeps the harbour lantern.",
        personality="dry, careful",
        scenario="A storm night.",
        mes_example="<START>\n{{user}}: Hello?\n{{char}}: Lantern's lit.",
    )


def said(chat, *lines):
    messages = [{"name": name, "is_user": name == "Rowan", "is_system": False, "mes": text} for name, text in lines]
    return chat_append(chat=chat, messages=messages, integrity=chat.integrity).chat


def build(chat, card, slots, *, mode="new", context_size=4000, reply=200, macros=None):
    return prompt_build(
        chat=chat, slots={s["name"]: s for s in slots}, macros=macros or {}, character=card,
        speakers=Speakers(char="Mira", user="Rowan", persona="A sailor home from sea."), tokenizer=Estimate(),
        context_size=context_size, reply_tokens=reply, mode=mode,
    )  # fmt: skip


def test_the_card_then_in_prompt_slots_then_examples_then_history_with_in_chat_slots_at_their_depths(user, card):
    chat = said(
        chat_create(user=user, title="Storm", character_ids=[card.pk]),
        ("Mira", "Evening."), ("Rowan", "Any ships?"), ("Mira", "One, late."), ("Rowan", "Whose?"),
    )  # fmt: skip
    slots = [
        slot("short", "Story so far: the storm began.", "in_prompt"),
        slot("long", "Mira owes Hale money.", "in_prompt"),
        slot("triggered", "Hale's ship is the Gull.", "in_chat", depth=1),
        slot("state_ledger", "Mira: tired.", "in_chat", depth=0),
        slot("scenes", "Earlier: the bell rang.", "in_chat", depth=9),
        slot("arcs", "", "in_chat", depth=2),  # empty: left out
        slot("canon", "Off.", "in_prompt", enabled=False),  # switched off: left out
    ]
    messages = build(chat, card, slots).messages
    contents = [m["content"] for m in messages]
    assert contents[:5] == [
        "You are Mira, talking with Rowan.",
        "Mira keeps the harbour lantern.",
        "Mira's personality: dry, careful",
        "Scenario: A storm night.",
        "About Rowan: A sailor home from sea.",
    ]
    assert contents[5:7] == ["Story so far: the storm began.", "Mira owes Hale money."]
    assert contents[7].startswith("Examples of how Mira writes:") and "Rowan: Hello?" in contents[7]
    # Depth 9 is deeper than the history: first; depth 1 before the newest message; depth 0 after it.
    assert contents[8:] == [
        "Earlier: the bell rang.", "Evening.", "Any ships?", "One, late.", "Hale's ship is the Gull.", "Whose?",
        "Mira: tired.",
    ]  # fmt: skip
    roles = [m["role"] for m in messages[8:]]
    assert roles == ["system", "assistant", "user", "assistant", "system", "user", "system"]
    assert "Off." not in contents


def test_the_history_keeps_the_newest_messages_that_fit_the_context_size(user, card):
    chat = chat_create(user=user, title="Long", character_ids=[card.pk])
    chat = said(
        chat, *[("Rowan" if i % 2 else "Mira", f"Line number {i} of a long night at the lantern.") for i in range(300)]
    )
    prompt = build(chat, card, [], context_size=1200, reply=200)
    assert prompt.tokens <= 1000 + 50  # the budget: context size minus the reply length (estimate's slack)
    kept = [m["content"] for m in prompt.messages if m["content"].startswith("Line number")]
    assert kept[-1] == "Line number 299 of a long night at the lantern."
    assert 5 < len(kept) < 300 and kept == sorted(kept, key=lambda t: int(t.split()[2]))
    assert prompt.info["left_out"] == 300 - len(kept) and prompt.info["history_from"] == 300 - len(kept)


def test_a_swipe_leaves_the_reply_it_redoes_out_and_continue_ends_on_it_with_the_nudge(user, card):
    chat = said(chat_create(user=user, title="S", character_ids=[card.pk]), ("Rowan", "Hi."), ("Mira", "Hello th"))
    swipe = [m["content"] for m in build(chat, card, [], mode="swipe").messages]
    assert swipe[-1] == "Hi." and "Hello th" not in swipe
    cont = build(chat, card, [], mode="continue").messages
    assert [m["content"] for m in cont[-2:]] == ["Hello th", CONTINUE_NUDGE]


def test_macros_of_memory_slots_and_speakers_are_resolved_and_a_card_without_system_prompt_gets_the_default(user):
    plain = CharacterFactory(user=user, name="Mira", description="Knows: {{smartmemory-long}}")
    chat = said(chat_create(user=user, title="M", character_ids=[plain.pk]), ("Rowan", "Hi {{char}}."))
    messages = build(chat, plain, [], macros={"{{smartmemory-long}}": "Hale owes her."}).messages
    contents = [m["content"] for m in messages]
    assert contents[0] == DEFAULT_SYSTEM.replace("{{char}}", "Mira").replace("{{user}}", "Rowan")
    assert "Knows: Hale owes her." in contents and "Hi Mira." in contents


def test_hidden_messages_are_left_out_and_a_group_names_the_other_speakers(user, card):
    other = CharacterFactory(user=user, name="Hale")
    chat = chat_create(user=user, title="G", character_ids=[card.pk, other.pk])
    chat = said(chat, ("Hale", "Ahoy."), ("Rowan", "Hi both."))
    chat = chat_append(
        chat=chat, messages=[{"name": "Rowan", "is_user": True, "is_system": True, "mes": "OOC note"}],
        integrity=chat.integrity,
    ).chat  # fmt: skip
    prompt = prompt_build(
        chat=chat, slots={}, macros={}, character=card, speakers=Speakers(char="Mira", user="Rowan", group=True),
        tokenizer=Estimate(), context_size=4000, reply_tokens=100, mode="new",
    )  # fmt: skip
    contents = [m["content"] for m in prompt.messages]
    assert "Hale: Ahoy." in contents and "OOC note" not in contents


def test_post_history_instructions_from_the_editor_come_after_the_history(user, card):
    character_update(character=card, data={"post_history_instructions": "Answer {{user}} in one line."})
    chat = said(chat_create(user=user, title="Storm", character_ids=[card.pk]), ("Mira", "Evening."), ("Rowan", "Hi."))
    contents = [m["content"] for m in build(chat, card, []).messages]
    assert contents[-3:] == ["Evening.", "Hi.", "Answer Rowan in one line."]


def test_another_clients_prompt_gets_the_slots_at_their_depths_and_says_where_they_went():
    """memory_placed, as the gateway uses it: the client's system messages first, the in-prompt slots after them,
    the in-chat slots at their depths (several at one depth in slot order, one deeper than the history first), and
    the positions of exactly what was added. The client's messages are left as they were, a macro resolved in a
    copy."""
    sent = [{"role": "system", "content": "Be Mira."}, {"role": "system", "content": "A storm night."}]
    sent += [{"role": "user" if n % 2 else "assistant", "content": f"line {n}"} for n in range(6)]
    sent[3] = {"role": "user", "content": "{{smartmemory-long}} and more"}
    before = [dict(message) for message in sent]
    slots = [
        slot("long", "Mira owes Hale.", "in_prompt"),
        slot("triggered", "Hale's ship is the Gull.", "in_chat", depth=1),
        slot("state_ledger", "Mira: tired.", "in_chat", depth=0),
        slot("scenes", "Earlier: the bell rang.", "in_chat", depth=9),
        slot("session", "Tonight: the storm.", "in_chat", depth=1, role="user"),
    ]
    placed, added = memory_placed(
        sent, slots={s["name"]: s for s in slots}, macros={"{{smartmemory-long}}": "LONG"},
        speakers=Speakers(char="Mira", user="Rowan"),
    )  # fmt: skip
    assert [(m["role"], m["content"]) for m in placed] == [
        ("system", "Be Mira."), ("system", "A storm night."), ("system", "Mira owes Hale."),
        ("system", "Earlier: the bell rang."), ("assistant", "line 0"), ("user", "LONG and more"),
        ("assistant", "line 2"), ("user", "line 3"), ("assistant", "line 4"),
        ("system", "Hale's ship is the Gull."), ("user", "Tonight: the storm."), ("user", "line 5"),
        ("system", "Mira: tired."),
    ]  # fmt: skip
    assert added == [2, 3, 9, 10, 12]
    assert sent == before
