"""Where a front end's trimmed history stands in a chat (docs/GATEWAY.md, "How chats are matched"): a front end
that sends only the newest messages, the oldest left out to fit its model's context, perhaps with the chat's first
messages (its greeting) kept ahead of them."""

from __future__ import annotations

from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Abs

from apps.chats.models import Message
from apps.gateway.services.request import Line, said

WINDOW_CHECK = 2  # messages that must stand in order for a trimmed history to be found in a chat
WINDOW_SLACK = 50  # messages deleted in the front end since, that a trimmed history may still be found past
WINDOW_CANDIDATES = 50  # messages read as where a trimmed history may start, the nearest its expected start first
WINDOW_PLACES = 5  # places a trimmed history's first messages stand in, at most, compared in each chat
HEAD_KEPT = 4  # messages from a chat's start a front end may keep ahead of the newest (its greeting), at most


def window_places(chats: list[tuple[int, int]], history: list[Line], *, after: int = 1) -> list[tuple[int, int]]:
    """(chat id, index) where the request's first messages stand in order at index `after` or later in the `chats`
    ((id, message count), the most recently written first): at most WINDOW_PLACES in each, in the chats' order and
    in each the nearest first to where a history of this length that ends at the chat's end would start; none when
    they stand nowhere. Two messages may stand in several places (an exchange said twice): the caller chooses the
    place the history agrees with longest. A trimmed history ends at about the chat's end, so only its last
    `len(history) + WINDOW_SLACK` messages are searched (by the chat and index key: a long chat is not scanned)."""
    if len(history) < WINDOW_CHECK or not chats:
        return []
    head = history[:WINDOW_CHECK]
    where = Q()
    for chat_id, count in chats:
        where |= Q(chat_id=chat_id, index__gte=max(after, count - len(history) - WINDOW_SLACK))
    rank = Case(*[When(chat_id=chat_id, then=Value(n)) for n, (chat_id, _) in enumerate(chats)])
    expected = Case(*[When(chat_id=chat_id, then=Value(count - len(history))) for chat_id, count in chats])
    # Its longest word narrows the rows read: a message stored with other spacing holds it too.
    word = max(head[0].said.split(), key=len, default="")[:200]
    rows = (  # the most recently written chats' first, before the cap, in each the nearest the expected start first
        Message.objects.filter(where, is_user=head[0].role == "user", is_system=False)
        .filter(mes__contains=word)
        .order_by(rank, Abs(F("index") - expected), "-index")
        .values_list("chat_id", "index", "mes")[:WINDOW_CANDIDATES]
    )
    candidates = [(chat_id, index) for chat_id, index, mes in rows if said(mes) == head[0].said]
    places: list[tuple[int, int]] = []
    for chat_id, index in _followed(candidates, head[1:]):
        if sum(place[0] == chat_id for place in places) < WINDOW_PLACES:
            places.append((chat_id, index))
    return places


def _followed(candidates: list[tuple[int, int]], rest: list[Line]) -> list[tuple[int, int]]:
    """The candidates (chat id, index) whose next messages (system messages aside) are `rest`: those next few read
    in one query, and a candidate followed by more hidden messages than that read alone (_stand)."""
    if not candidates:
        return []
    reach = len(rest) + 2
    where = Q()
    for chat_id, index in candidates:
        where |= Q(chat_id=chat_id, index__gt=index, index__lte=index + reach)
    near: dict[tuple[int, int], tuple[bool, bool, str]] = {
        (chat_id, index): (is_user, is_system, mes)
        for chat_id, index, is_user, is_system, mes in Message.objects.filter(where).values_list(
            "chat_id", "index", "is_user", "is_system", "mes"
        )
    }
    kept = []
    for chat_id, index in candidates:
        shown = [near[chat_id, n] for n in range(index + 1, index + reach + 1) if (chat_id, n) in near]
        shown = [(is_user, mes) for is_user, is_system, mes in shown if not is_system][: len(rest)]
        if len(shown) < len(rest):  # hidden messages, a gap, or the chat's end: read as it stands
            stands = _stand(chat_id, index + 1, rest)
        else:
            stands = _says(shown, rest)
        if stands:
            kept.append((chat_id, index))
    return kept


def _stand(chat_id: int, index: int, lines: list[Line]) -> bool:
    """Whether the chat's messages from `index` on (system messages aside) are `lines`: the same speakers saying the
    same words, whitespace normalised."""
    following = list(
        Message.objects.filter(chat_id=chat_id, index__gte=index, is_system=False)
        .order_by("index")
        .values_list("is_user", "mes")[: len(lines)]
    )
    return len(following) == len(lines) and _says(following, lines)


def _says(rows: list[tuple[bool, str]], lines: list[Line]) -> bool:
    """Whether the chat's (is_user, mes) rows are the lines: the same speakers saying the same words, whitespace
    normalised."""
    return all(
        is_user == (line.role == "user") and said(mes) == line.said
        for (is_user, mes), line in zip(rows, lines, strict=True)
    )


def kept_window(chats: list[tuple[int, int]], history: list[Line]) -> tuple[int, list[tuple[int, int]]]:
    """(head, places) of a history whose first `head` messages (at most HEAD_KEPT, before the person's first: the
    greeting) are a chat's first, and whose next ones stand in order past them: a front end that keeps the greeting
    ahead of its cut. `places` are window_places' of those next ones in the `chats` ((id, message count), the most
    recently written first) that begin with the head; (0, []) when none does."""
    first_user = next((n for n, line in enumerate(history) if line.role == "user"), 0)
    for head in range(1, min(first_user, HEAD_KEPT) + 1):
        places = window_places(chats, history[head:], after=head + 1)
        begun = {chat_id: _stand(chat_id, 0, history[:head]) for chat_id in dict(places)}
        places = [(chat_id, index) for chat_id, index in places if begun[chat_id]]
        if places:
            return head, places
    return 0, []
