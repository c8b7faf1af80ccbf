"""The prompt of a reply, assembled as SillyTavern's chat-completion prompt is, with memory in its slots
(docs/GLOSSARY.md, slot):

1. the story string, as system messages: the card's system prompt (or a default), description, personality and
   scenario, and the person's persona;
2. the in-prompt memory slots, each a system message, in slot order, after the card;
3. the card's example messages;
4. the history, newest first until the budget is spent (the connection's context size minus the reply length and
   what the rest of the prompt takes), then put back in order; the in-chat slots go in at their depth counted from
   the newest message (depth 0: after it), with their role;
5. the card's post-history instructions, and the nudge of the mode (continue, impersonate).

`{{char}}`, `{{user}}` and the `{{smartmemory-*}}` macros are resolved everywhere. Messages SillyTavern hides from
the model (`is_system`) are left out; in a group, a line of another character is prefixed with its name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apps.chats.models import Character, Chat, Message
from apps.chats.services.characters import character_post_history
from apps.chats.services.macros import macros_substitute
from apps.injection.services.context import Context
from apps.llm.models import Connection
from apps.llm.profiles import connection_context_size
from apps.llm.tokens import Tokenizer, tokenizer_for
from apps.lorebooks.services.lore import chat_lore
from apps.lorebooks.services.scan import Activation

DEFAULT_SYSTEM = "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
CONTINUE_NUDGE = "[Continue your last message without repeating its original content.]"
IMPERSONATE_NUDGE = (
    "[Write your next reply from the point of view of {{user}}, using the chat history so far as a guideline for "
    "the writing style of {{user}}. Don't write as {{char}} or system. Don't describe actions of {{char}}.]"
)
EXAMPLES_HEADING = "Examples of how {{char}} writes:"
_START = re.compile(r"^[^\S\n]*<START>[^\S\n]*$", re.IGNORECASE | re.MULTILINE)  # a line's own spaces: \s* backtracked
HISTORY_PAGE = 200  # messages read at a time, newest first, until the budget is spent


@dataclass
class Prompt:
    messages: list[dict[str, str]]
    tokens: int
    tokenizer: str
    exact: bool
    budget: int
    info: dict[str, Any] = field(default_factory=dict)
    # What is kept with the reply (Generation.prompt) when not `messages` itself: another client's prompt keeps
    # the chat's messages it repeats by reference (apps/gateway/services/complete.py, `prompt_kept`).
    kept: list[dict[str, Any]] | None = None
    # The chat's World Info timed effects after this prompt's scan, when they changed (kept in its metadata).
    timed: dict[str, Any] | None = None


@dataclass
class Speakers:
    """Who the reply is from (`char`), who the person is (`user`), and the persona's description."""

    char: str
    user: str
    persona: str = ""
    group: bool = False


def _resolve(text: str, speakers: Speakers, macros: dict[str, str]) -> str:
    return macros_substitute(_macros_only(text, macros), char=speakers.char, user=speakers.user)


def _story(character: Character | None, speakers: Speakers) -> list[str]:
    """The card's parts, in SillyTavern's story-string order."""
    parts = [(character.system_prompt if character else "") or DEFAULT_SYSTEM]
    if character is not None:
        parts += [
            character.description,
            f"{{{{char}}}}'s personality: {character.personality}" if character.personality.strip() else "",
            f"Scenario: {character.scenario}" if character.scenario.strip() else "",
        ]
    if speakers.persona.strip():
        parts.append(f"About {{{{user}}}}: {speakers.persona}")
    return [part.strip() for part in parts if part and part.strip()]


def _examples(character: Character | None, lore: Activation | None = None) -> str:
    """The card's example messages, with World Info's before and after them (positions 5 and 6)."""
    text = (character.mes_example if character else "") or ""
    blocks = [block.strip() for block in _START.split(text) if block.strip()]
    for where, content in lore.examples if lore else []:
        added = [block.strip() for block in _START.split(content) if block.strip()]
        blocks = added + blocks if where == "before" else blocks + added
    return EXAMPLES_HEADING + "\n\n" + "\n\n".join(blocks) if blocks else ""


ROLES = ("system", "user", "assistant")


def author_note(lore: Activation | None, metadata: dict[str, Any], user_turns: Callable[[], int]) -> dict | None:
    """The chat's author's note as SillyTavern places it, or None: its text (`note_prompt`) with World Info's top and
    bottom entries around it, when its interval says so (`note_interval`, 1 by default: every reply; N: when the
    person's messages are a multiple of N; 0: never; `user_turns` counts them only then), at its position
    (`note_position`: 1 in the chat at `note_depth` (4) with `note_role` (system), 0 right after the system prompt,
    2 before it). SillyTavern's Author's Note module gives these defaults to a chat that lacks them."""
    interval = _number(metadata.get("note_interval"), 1)
    if interval <= 0:
        return None
    if interval != 1:
        turns = user_turns()
        if turns <= 0 or (turns % interval if turns >= interval else interval - turns) != 0:
            return None
    note = metadata.get("note_prompt") if isinstance(metadata.get("note_prompt"), str) else ""
    top, bottom = (lore.an_top, lore.an_bottom) if lore is not None else ([], [])
    # World Info joins them with newlines, and SillyTavern trims an extension prompt as it puts it in
    text = ("\n".join(top) + "\n" + note + "\n" + "\n".join(bottom)).strip()
    if not text.strip():
        return None
    return {
        "position": _number(metadata.get("note_position"), 1),
        "depth": _number(metadata.get("note_depth"), 4),
        "role": _number(metadata.get("note_role"), 0),
        "text": text,
    }


def _lore_in_chat(lore: Activation | None, note: dict | None) -> list[dict[str, Any]]:
    """What goes into the chat, as SillyTavern puts it there: the author's note (`author_note`) when it is in the
    chat, and World Info's entries at a depth, one message per depth and role, the note first where they meet
    (SillyTavern joins its injections of one depth and role). Where several land in one place (a depth past the
    oldest message, or one depth in several roles), SillyTavern's order: the deeper first, then assistant, user,
    system."""
    at: dict[tuple[int, int], list[str]] = {}
    if note is not None and note["position"] == 1:
        at.setdefault((note["depth"], note["role"]), []).append(note["text"])
    for group in lore.depth if lore is not None else []:
        at.setdefault((int(group["depth"]), int(group["role"])), []).append("\n".join(group["entries"]))
    return [{"depth": depth, "role": ROLES[role] if 0 <= role < 3 else "system", "text": "\n".join(texts)}
            for (depth, role), texts in sorted(at.items(), key=lambda item: (-item[0][0], -item[0][1]))]  # fmt: skip


_OUTLET = re.compile(r"\{\{outlet::(.+?)\}\}", re.IGNORECASE)


def _outlets(text: str, lore: Activation | None) -> str:
    """`{{outlet::name}}` replaced by World Info's entries in that outlet (position 7), one per line, or nothing,
    as SillyTavern's macro does."""
    if "{{" not in text:
        return text
    outlets = lore.outlets if lore is not None else {}
    return _OUTLET.sub(lambda match: "\n".join(outlets.get(match.group(1).strip(), [])), text)


def _number(value: Any, default: int) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _line(message: Message, speakers: Speakers) -> dict[str, str]:
    if message.is_user:
        return {"role": "user", "content": message.mes}
    if speakers.group and message.name and message.name != speakers.char:
        return {"role": "assistant", "content": f"{message.name}: {message.mes}"}
    return {"role": "assistant", "content": message.mes}


LINE_FIELDS = ("index", "is_user", "is_system", "name", "mes")


def _history(chat: Chat, *, before: int, budget: int, tokenizer: Tokenizer, speakers, macros):
    """The newest messages before index `before` that fit in `budget` tokens, in chat order, with their indices."""
    kept: list[tuple[int, dict[str, str]]] = []
    spent = 0
    end = before
    while end > 0:
        page = list(
            Message.objects.filter(chat=chat, index__lt=end, index__gte=max(0, end - HISTORY_PAGE))
            .order_by("-index")
            .only(*LINE_FIELDS)  # not the JSON of swipes and extra: most of the work of reading a page
        )
        if not page:
            break
        for message in page:
            if message.is_system:
                continue
            line = _line(message, speakers)
            line["content"] = _resolve(line["content"], speakers, macros)
            cost = tokenizer.count_messages([line])
            if spent + cost > budget and kept:
                return list(reversed(kept)), spent
            kept.append((message.index, line))
            spent += cost
        end = page[-1].index
    return list(reversed(kept)), spent


def _in_chat(history: list[dict[str, str]], slots: list[dict[str, Any]]) -> tuple[list[dict], list[int]]:
    """The in-chat slots put into the history at their depth, counted from the newest message (depth 0: after it;
    a depth past the oldest kept message: before it), in slot order where several meet; and their positions. The
    history is copied in slices between them (another client sends a whole history with each turn)."""
    at: dict[int, list[dict[str, str]]] = {}
    for slot in slots:
        at.setdefault(max(0, len(history) - slot["depth"]), []).append({"role": slot["role"], "content": slot["text"]})
    lines: list[dict[str, str]] = []
    added: list[int] = []
    start = 0
    for position in sorted(at):
        lines += history[start:position]
        for line in at[position]:
            added.append(len(lines))
            lines.append(line)
        start = position
    return lines + history[start:], added


def prompt_build(
    *,
    chat: Chat,
    slots: dict[str, dict[str, Any]],
    macros: dict[str, str],
    character: Character | None,
    speakers: Speakers,
    tokenizer: Tokenizer,
    context_size: int,
    reply_tokens: int,
    mode: str,
    lore: Activation | None = None,
) -> Prompt:
    """The messages for the model. `slots`: the context's slots (the context builder's answer); `mode`: new,
    swipe (the last reply is left out: it is being redone), continue (the last reply is the end of the prompt) or
    impersonate; `lore`: the World Info the chat activated, put where SillyTavern puts it (before the card's
    description, after the card, around the examples, in the chat)."""
    active = [slot for slot in slots.values() if slot["enabled"] and slot["text"].strip()]
    head = [{"role": "system", "content": part} for part in _story(character, speakers)]
    if lore is not None and lore.before:
        head.insert(1, {"role": "system", "content": "\n".join(lore.before)})
    if lore is not None and lore.after:
        head.append({"role": "system", "content": "\n".join(lore.after)})
    head += [{"role": "system", "content": slot["text"]} for slot in active if slot["position"] == "in_prompt"]
    examples = _examples(character, lore)
    if examples:
        head.append({"role": "system", "content": examples})
    tail = []
    post = character_post_history(character) if character is not None else ""
    if post.strip():
        tail.append({"role": "system", "content": post})
    if mode == "continue":
        tail.append({"role": "system", "content": CONTINUE_NUDGE})
    elif mode == "impersonate":
        tail.append({"role": "system", "content": IMPERSONATE_NUDGE})
    in_chat = [slot for slot in active if slot["position"] == "in_chat"]
    metadata = chat.chat_metadata or {}
    note = author_note(lore, metadata, lambda: Message.objects.filter(chat=chat, is_user=True).count())
    if note is not None and note["position"] in (0, 2):  # "in prompt": after the system prompt; "before prompt"
        line = {"role": ROLES[note["role"]] if 0 <= note["role"] < 3 else "system", "content": note["text"]}
        head.insert(1 if note["position"] == 0 else 0, line)
    in_chat += _lore_in_chat(lore, note)
    for line in (*head, *tail):
        line["content"] = _resolve(_outlets(line["content"], lore), speakers, macros)
    in_chat = [slot | {"text": _resolve(_outlets(slot["text"], lore), speakers, macros)} for slot in in_chat]

    budget = max(context_size - reply_tokens, 0)
    fixed = tokenizer.count_messages(head + tail) + sum(tokenizer.count(slot["text"]) + 4 for slot in in_chat)
    before = chat.message_count - 1 if mode == "swipe" else chat.message_count
    kept, spent = _history(
        chat, before=before, budget=max(budget - fixed, 0), tokenizer=tokenizer, speakers=speakers, macros=macros
    )
    history, _ = _in_chat([line for _, line in kept], in_chat)
    messages = head + history + tail
    total = tokenizer.count_messages(messages)
    info = {
        "context_size": context_size,
        "reply_tokens": reply_tokens,
        "history_from": kept[0][0] if kept else None,
        "history_messages": len(kept),
        "history_tokens": spent,
        "left_out": kept[0][0] if kept else before,  # the older messages that did not fit
        "slots": [slot["name"] for slot in active],
    }
    return Prompt(messages, total, tokenizer.name, tokenizer.exact, budget, info)


def memory_placed(
    messages: list[dict[str, str]],
    *,
    slots: dict[str, dict[str, Any]],
    macros: dict[str, str],
    speakers: Speakers,
    lore: Activation | None = None,
    metadata: dict[str, Any] | None = None,
) -> tuple[list[dict[str, str]], list[int]]:
    """Another client's own prompt with the memory slots placed as `prompt_build` places them: the in-prompt
    slots as system messages after its leading system messages, the in-chat slots in the messages after those at
    their depth and role. What the client wrote is kept as it is, its `{{smartmemory-*}}` macros resolved. `lore`,
    the World Info the chat activated (lore_sent.py `lore_unsent` of it): its entries before and after the
    character and around the examples as one system message before the slots (the client's card is somewhere in
    its own system messages), those at a depth and of the author's note at theirs (`metadata`: the chat's, for the
    note's depth).
    Answers the messages and the positions of those added (the Prompt page marks them)."""
    active = [slot for slot in slots.values() if slot["enabled"] and slot["text"].strip()]
    # The client's messages as they are (its whole history, each turn), copied only where a macro is resolved.
    lines = [m if "{{" not in m["content"] else dict(m, content=_macros_only(m["content"], macros)) for m in messages]
    lead = 0
    while lead < len(lines) and lines[lead]["role"] == "system":
        lead += 1
    head = [{"role": "system", "content": _resolve(slot["text"], speakers, macros)}
            for slot in active if slot["position"] == "in_prompt"]  # fmt: skip
    in_chat = [slot | {"text": _resolve(slot["text"], speakers, macros)} for slot in active
               if slot["position"] == "in_chat"]  # fmt: skip
    if lore is not None:
        told = [*lore.before, *lore.after, *(content for _, content in lore.examples)]
        # The note's World Info entries only: the client has put the author's note itself in its own prompt.
        note = (
            author_note(lore, {**(metadata or {}), "note_prompt": "", "note_interval": 1}, lambda: 0)
            if lore.an_top or lore.an_bottom
            else None
        )
        if note is not None and note["position"] in (0, 2):
            told.append(note["text"])
        if told:
            head.insert(0, {"role": "system", "content": _resolve("\n".join(told), speakers, macros)})
        in_chat += [slot | {"text": _resolve(slot["text"], speakers, macros)}
                    for slot in _lore_in_chat(lore, note)]  # fmt: skip
    history, in_history = _in_chat(lines[lead:], in_chat)
    added = [lead + n for n in range(len(head))] + [lead + len(head) + n for n in in_history]
    return lines[:lead] + head + history, added


def _macros_only(text: str, macros: dict[str, str]) -> str:
    if "{{" not in text:  # every macro is a {{…}}: most of a long history has none, and is not searched for each
        return text
    for token, value in macros.items():
        if token in text:
            text = text.replace(token, value)
    return text


@dataclass
class Composing:
    """What a prompt is made from once the context is built: the web chat makes it from the card and the stored
    history (`card_prompt`); another client may bring its own messages and only place the memory in them."""

    chat: Chat
    context: Context
    responder: Character | None
    speakers: Speakers
    connection: Connection
    mode: str


def composing_lore(
    composing: Composing, tokenizer: Tokenizer, context_size: int
) -> tuple[Activation | None, dict[str, Any]]:
    """The World Info the chat activates for this reply (apps/lorebooks/services/lore.py `chat_lore`)."""
    speakers, connection = composing.speakers, composing.connection
    return chat_lore(
        chat=composing.chat, character=composing.responder, names=(speakers.char, speakers.user),
        persona=speakers.persona, max_context=max(context_size - connection.reply_tokens, 0),
        count_tokens=tokenizer.count, resolve=lambda text: _resolve(text, speakers, composing.context.macros),
        mode=composing.mode,
    )  # fmt: skip


def card_prompt(composing: Composing) -> Prompt:
    """The web chat's prompt: the card, the World Info the chat activates, the memory slots and the history that
    fits (`prompt_build`)."""
    connection, speakers = composing.connection, composing.speakers
    tokenizer, context_size = tokenizer_for(connection), connection_context_size(connection)
    lore, lore_info = composing_lore(composing, tokenizer, context_size)
    prompt = prompt_build(
        chat=composing.chat, slots=composing.context.slots, macros=composing.context.macros,
        character=composing.responder, speakers=speakers, tokenizer=tokenizer, context_size=context_size,
        reply_tokens=connection.reply_tokens, mode=composing.mode, lore=lore,
    )  # fmt: skip
    if lore_info:
        prompt.info["lorebook"] = lore_info
    if lore is not None and lore.timed_changed:
        prompt.timed = lore.timed_state
    return prompt
