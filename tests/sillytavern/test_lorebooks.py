"""The same World Info, activated by a real SillyTavern 1.19.0 and by Lorekeeper, gives the same entries at the same
places (docs/LOREBOOKS.md).

A 40-entry lorebook that exercises every rule (keys, regex, case, whole words, the four selective logics, constant,
disabled, probability, scan depth, recursion with its exclusions and delay levels, inclusion groups with priority
and scoring, insertion order, every position, sticky, cooldown and delay) is SillyTavern's active World Info. A
person chats with Mira in Chromium for three turns; after each, the prompt SillyTavern's model received is set
beside the prompt Lorekeeper builds for the same chat with the same book: the same entries, in the same order, and
each in-chat entry at the same depth with the same role. Entry contents are tags (`[W07]`) so that each can be found
in a prompt. The budget is left out (the two count tokens with different tokenizers); tests/lorebooks/test_scan.py
tests it.
"""

from __future__ import annotations

import io
import json
import re

import pytest

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_import
from apps.chats.services.writes import chat_append
from apps.generation.models import Generation
from apps.generation.services.generate import generation_prepare
from apps.llm.services import connection_create
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import lorebook_import
from apps.lorebooks.services.fields import FIELDS
from tests.sillytavern import harness

# Transactional: the ORM calls made while Playwright runs use connections of their own (tests/sillytavern/conftest.py),
# outside a test transaction, so only a flush after the test takes their rows away.
pytestmark = pytest.mark.django_db(transaction=True)

GREETING = "The lantern is lit. What brings you to the harbour tonight?"
TAG = re.compile(r"\[W\d\d\]")


def _entry(uid: int, content: str, **fields) -> dict:
    """An entry as SillyTavern's editor saves one: every field, its defaults where not given."""
    return {**{name: default for name, (_, default) in FIELDS.items()}, "uid": uid, "content": content, **fields}


# Turn 1: "I saw the gull and the ship by the Tower, with an anchor and the bell. Salt and pepper."
# Turn 2: "The storm hit the harbour-master. Ship again, bell again, anchor, and the kraken."
# Turn 3: "Only the bell and the kraken now, and a compass."
ENTRIES = [
    _entry(0, "[W00] gull", key=["gull"], order=50),
    _entry(1, "[W01] ship after", key=["ship"], position=1, order=40),
    _entry(2, "[W02] never: disabled", key=["gull"], disable=True),
    _entry(3, "[W03] constant", constant=True, order=10),
    _entry(4, "[W04] never: probability 0", key=["gull"], probability=0),
    _entry(5, "[W05] regex tower", key=["/\\btow(er|n)\\b/i"], order=60),
    _entry(6, "[W06] never: case-sensitive Gull", key=["Gull"], caseSensitive=True),
    _entry(7, "[W07] part word", key=["ncho"], matchWholeWords=False, order=70),
    _entry(8, "[W08] never: whole word ncho", key=["ncho"]),
    _entry(9, "[W09] AND ANY", key=["salt"], keysecondary=["pepper", "vinegar"], selectiveLogic=0),
    _entry(10, "[W10] never: AND ANY", key=["salt"], keysecondary=["vinegar", "oil"], selectiveLogic=0),
    _entry(11, "[W11] NOT ALL", key=["salt"], keysecondary=["pepper", "vinegar"], selectiveLogic=1),
    _entry(12, "[W12] never: NOT ALL", key=["salt"], keysecondary=["pepper", "gull"], selectiveLogic=1),
    _entry(13, "[W13] NOT ANY", key=["salt"], keysecondary=["vinegar", "oil"], selectiveLogic=2),
    _entry(14, "[W14] never: NOT ANY", key=["salt"], keysecondary=["pepper"], selectiveLogic=2),
    _entry(15, "[W15] AND ALL", key=["salt"], keysecondary=["pepper", "bell"], selectiveLogic=3),
    _entry(16, "[W16] never: AND ALL", key=["salt"], keysecondary=["pepper", "vinegar"], selectiveLogic=3),
    _entry(17, "[W17] from the greeting: scan depth 3", key=["lantern"], scanDepth=3),
    _entry(18, "[W18] never: lantern at the global depth", key=["lantern"]),
    _entry(19, "[W19] ship: recursion brings the keeper", key=["ship"], order=30),
    _entry(20, "[W20] keeper, by recursion", key=["keeper"], order=29),
    _entry(21, "[W21] never: keeper, excluded from recursion", key=["keeper"], excludeRecursion=True),
    _entry(22, "[W22] anchor: prevents recursion of its tide", key=["anchor"], preventRecursion=True),
    _entry(23, "[W23] never: tide (only in a prevented entry)", key=["tide"]),
    _entry(24, "[W24] delayed to recursion: keeper", key=["keeper"], delayUntilRecursion=1),
    _entry(25, "[W25] group a, prioritized", key=["gull"], group="birds", groupOverride=True, order=90),
    _entry(26, "[W26] never: group a loser", key=["gull"], group="birds", order=95),
    _entry(27, "[W27] scored group winner", key=["storm", "harbour"], group="weather", useGroupScoring=True),
    _entry(28, "[W28] never: scored group loser", key=["storm"], group="weather", useGroupScoring=True),
    _entry(29, "[W29] at depth 1 as user", key=["bell"], position=4, depth=1, role=1, order=20),
    _entry(30, "[W30] at depth 0 as assistant", key=["bell"], position=4, depth=0, role=2, order=21),
    _entry(31, "[W31] author's note top", key=["ship"], position=2),
    _entry(32, "[W32] author's note bottom", key=["ship"], position=3),
    _entry(33, "{{user}}: [W33] before the examples\n{{char}}: Noted.", key=["gull"], position=5),
    _entry(34, "{{user}}: [W34] after the examples\n{{char}}: Noted.", key=["anchor"], position=6),
    _entry(35, "[W35] sticky for 3 messages", key=["anchor"], sticky=3, position=4, depth=2),
    _entry(36, "[W36] cooldown of 3 messages", key=["bell"], cooldown=3),
    _entry(37, "[W37] delayed until the chat has 3 messages", key=["kraken", "gull"], delay=3),
    _entry(38, "[W38] order 1: before, lowest order first", key=["gull"], order=1),
    _entry(39, "[W39] order 99: nearest the chat", key=["gull"], order=99),
]
TURNS = [
    "I saw the gull and the ship by the Tower, with an anchor and the bell. Salt and pepper, and a poncho.",
    "The storm hit the harbour-master. Ship again, bell again, and the kraken.",
    "Only the bell and the kraken now, and a compass.",
]


def layout(messages: list[dict], history: list[str]) -> tuple[list[str], list[tuple[str, str, int]]]:
    """Where each tagged entry is in a prompt: every tag in the order it appears, and for those inside the chat,
    (tag, role, how many of the chat's own messages follow it)."""
    order, in_chat = [], []
    kinds = ["history" if message["content"] in history else "other" for message in messages]
    first_history = kinds.index("history")
    for n, message in enumerate(messages):
        tags = TAG.findall(str(message["content"]))
        order += tags
        if n > first_history and kinds[n] == "other":
            after = kinds[n + 1 :].count("history")
            in_chat += [(tag, message["role"], after) for tag in tags]
    return order, sorted(in_chat)


def test_sillytavern_and_lorekeeper_activate_the_same_entries_at_the_same_places(st, st_open, llm_server, user):
    world = {"entries": {str(entry["uid"]): entry for entry in ENTRIES}}
    (st.user_dir / "worlds").mkdir(parents=True, exist_ok=True)
    (st.user_dir / "worlds" / "Harbour.json").write_text(json.dumps(world))
    st.add_character("Mira", first_mes=GREETING, description="A harbour clerk.", chat="Mira - lore",
                     mes_example="<START>\n{{user}}: Hello?\n{{char}}: Evening.")  # fmt: skip

    def active_world(data: dict) -> None:
        data["world_info_settings"]["world_info"] = {"globalSelect": ["Harbour"]}

    page = st_open(install_extension=False, settings=active_world)
    harness.open_character(page, "Mira")
    connection = connection_create(
        user=user, name="scripted", base_url=llm_server.url, model="scripted-model", api_key="sk-test-1234567890abcd",
        context_window=4095, reply_tokens=300,  # SillyTavern's defaults: the same World Info budget
    )  # fmt: skip
    lorebook_import(user=user, name="Harbour", data=world)
    Lorebook.objects.filter(user=user).update(scope=Lorebook.Scope.GLOBAL)
    chat = None
    for turn, text in enumerate(TURNS, start=1):
        llm_server.on(lambda prompt: True, f"Reply {turn}.")
        harness.send_message(page, text)
        theirs = llm_server.requests[-1]["body"]["messages"]
        path = harness.chat_file(st, page)
        lines = path.read_text().splitlines()
        if chat is None:  # the chat as SillyTavern has it before its reply; Lorekeeper then follows turn by turn
            header = json.loads(lines[0])
            header["chat_metadata"].pop("timedWorldInfo", None)
            head = "\n".join([json.dumps(header), *lines[1:-1]]) + "\n"
            chat = chat_import(user=user, stream=io.BytesIO(head.encode()), title="Lore")
        else:
            last = json.loads(lines[-2])  # the person's new message
            chat = chat_append(chat=chat, messages=[last], integrity=chat.integrity).chat
        prepared = generation_prepare(user=user, chat=chat, connection_id=connection.pk)
        ours = prepared.generation.prompt
        Generation.objects.filter(pk=prepared.generation.pk).update(state=Generation.State.DONE)
        history = [message.mes for message in Message.objects.filter(chat=chat)]
        assert layout(ours, history) == layout(theirs, history), f"turn {turn}: {theirs}"
        assert TAG.findall(json.dumps(theirs)), "SillyTavern activated no entry: the comparison proves nothing"
        reply = json.loads(lines[-1])
        chat = chat_append(chat=Chat.objects.get(pk=chat.pk), messages=[reply], integrity=Chat.objects.get(
            pk=chat.pk).integrity).chat  # fmt: skip
