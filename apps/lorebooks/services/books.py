"""Lorebooks in and out: a SillyTavern World Info file imported whole or not at all, and exported as SillyTavern
loads it; a character card's embedded book (`character_book`) read as SillyTavern converts it."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.http import content_disposition_header

from apps.chats.models import Chat
from apps.chats.services.characters import card_extensions, card_with_world, character_update, extra_books_clean
from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import unstorable_reason
from apps.common.tasks import task_send
from apps.lorebooks.models import Lorebook, LorebookEntry, LorebookRevision
from apps.lorebooks.services.fields import (
    DEFAULT_DEPTH,
    DEFAULT_WEIGHT,
    FIELDS,
    MAX_ENTRIES,
    entries_clean,
    entry_clean,
)
from apps.lorebooks.services.revisions import book_digest, client_copy_taken, edited_here, revision_keep

MAX_NAME = 200


def _extra(data: dict[str, Any]) -> dict[str, Any]:
    """The file's keys besides `entries`, kept as given if PostgreSQL can store them."""
    extra = {key: value for key, value in data.items() if key != "entries"}
    reason = unstorable_reason(extra)
    if reason:
        raise ApplicationError(f"The file's keys besides its entries: one {reason}.", {"field": "data"})
    return extra


def lorebook_name_clean(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ApplicationError("A lorebook needs a name.", {"field": "name"})
    name = name.strip().removesuffix(".json")
    if len(name) > MAX_NAME or any(char in name for char in "/\\\x00") or unstorable_reason(name):
        raise ApplicationError(
            f"A lorebook's name has at most {MAX_NAME} characters and no slashes.", {"field": "name"}
        )
    return name


IMPORT_REPLACED = "Replaced by an imported file"  # the revision a person's import over a book keeps


@transaction.atomic
def lorebook_import(*, user: AbstractUser, name: str, data: Any, replace: bool = False, kept_as: str = "") -> Lorebook:
    """A World Info file (`{"entries": {uid: entry}}`, SillyTavern's `worlds/<name>.json`) as the account's book
    `name`. Every entry is checked first: one bad entry refuses the whole file and nothing is stored. A book of
    the same name is refused (409) unless `replace`, which puts the file's entries in place of the book's; with
    `kept_as` (the reason a person reads), the book's version it replaced is kept as a revision, unless the file
    made it no different."""
    name = lorebook_name_clean(name)
    if not isinstance(data, dict) or "entries" not in data:
        raise ApplicationError("A World Info file is an object with `entries`.", {"field": "entries"})
    entries = entries_clean(data["entries"])
    book = Lorebook.objects.select_for_update().filter(user=user, name=name).first()
    if book is not None and not replace:
        raise ApplicationError(f"You already have a lorebook named {name!r}.", {"field": "name"}, status=409)
    extra = _extra(data)
    if book is None:
        try:
            with transaction.atomic():
                book = Lorebook.objects.create(user=user, name=name, extra=extra)
        except IntegrityError:  # another request made a book of this name since the lookup
            raise ApplicationError(
                f"A lorebook named {name!r} was made meanwhile: send it again.", {"field": "name"}, status=409
            ) from None
        _entries_add(book, entries)
    else:
        before = lorebook_export(book=book) if kept_as else None
        _content_replace(book, extra, entries)
        _keep_replaced(book, before, reason=kept_as)
    return book


def _keep_replaced(book: Lorebook, before: dict[str, Any] | None, *, reason: str) -> None:
    """`before` (the book's export before its content was replaced) kept as a revision, unless it is None or the
    book is no different now."""
    if before is None:
        return
    book.refresh_from_db(fields=["extra"])  # as stored: PostgreSQL gives some numbers back in another form
    if book_digest(before) != book_digest(lorebook_export(book=book)):
        revision_keep(book=book, reason=reason, data=before)


def _content_replace(book: Lorebook, extra: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    """The book's file keys and entries made these (checked before)."""
    book.extra = extra
    book.save(update_fields=["extra", "updated_at"])
    book.entries.all().delete()
    _entries_add(book, entries)


def _entries_add(book: Lorebook, entries: list[dict[str, Any]]) -> None:
    LorebookEntry.objects.bulk_create(
        [LorebookEntry(lorebook=book, uid=entry["uid"], data=entry) for entry in entries], batch_size=500
    )
    _vectors_later(book, entries)


@transaction.atomic
def lorebook_put(
    *,
    user: AbstractUser,
    uid: uuid.UUID,
    name: str,
    scope: str,
    data: dict[str, Any] | None,
    rename: bool = True,
    kept_as: str = "",
) -> tuple[Lorebook, str]:
    """The book `uid` of the account made `data` (a World Info file, every entry checked as at import), with
    `name` and `scope`: created, or its entries replaced (an archive's book, apps/archives; a synced one,
    apps/sync). `data` None keeps a stored book's entries. A name another of the account's books holds is refused,
    or with `rename` the book takes the first free "<name> (2)", "(3)"…: nothing is lost. With `kept_as` (the
    reason a person reads), a stored book's content that `data` replaced is kept as a revision. Answers the book and
    what happened: created, updated or renamed."""
    if scope not in Lorebook.Scope.values:
        raise ApplicationError(f"`scope` is one of {', '.join(Lorebook.Scope.values)}.", {"field": "scope"})
    wanted = lorebook_name_clean(name)
    book = Lorebook.objects.select_for_update().filter(user=user, uid=uid).first()
    if data is None and book is not None:
        data = {**book.extra, "entries": None}
    if not isinstance(data, dict) or "entries" not in data:
        raise ApplicationError("A World Info file is an object with `entries`.", {"field": "entries"})
    entries = entries_clean(data["entries"]) if data["entries"] is not None else None
    taken = set(Lorebook.objects.filter(user=user).exclude(uid=uid).values_list("name", flat=True))
    name, number = wanted, 1
    while name in taken:
        if not rename:
            raise ApplicationError(f"You already have a lorebook named {wanted!r}.", {"field": "name"}, status=409)
        number += 1
        name = lorebook_name_clean(f"{wanted[: MAX_NAME - 8]} ({number})")
    extra = _extra(data)
    outcome = "updated" if book is not None else ("renamed" if name != wanted else "created")
    before = None
    if book is None:
        book = Lorebook.objects.create(user=user, uid=uid, name=name, scope=scope, extra=extra)
    else:
        before = lorebook_export(book=book) if kept_as and entries is not None else None
        book.name, book.scope, book.extra = name, scope, extra
        book.save(update_fields=["name", "scope", "extra", "updated_at"])
        if entries is None:
            return book, outcome
        book.entries.all().delete()
    _entries_add(book, entries)
    _keep_replaced(book, before, reason=kept_as)
    return book, outcome


def _vectors_later(book: Lorebook, entries: list[dict[str, Any]]) -> None:
    """Once the transaction commits, the book's vectorized entries are embedded in the background
    (services/meaning.py `vectors_prepare`)."""
    if any(entry.get("vectorized") for entry in entries):
        late = "the first chat to compare them embeds them"
        transaction.on_commit(lambda: task_send("lorebooks.prepare_vectors", book.pk, catch_up=late))


USES = ("chat", "character", "global", "extra")
MAX_SENT = 50  # books in one request from a client
MAX_NOT_GLOBAL = 5000  # names of the client's other books
MAX_OWNERS = 100  # characters one book sent is linked to (a group's members)


@transaction.atomic
def chat_books_put(
    *,
    user: AbstractUser,
    chat: Chat,
    books: Any,
    not_global: list[str] | None = None,
    extra_books: list[dict[str, Any]] | None = None,
) -> list[tuple[Lorebook, str]]:
    """The books a client's open chat uses, as the client has them (`[{"name", "data", "use"}]`, SillyTavern's
    World Info files): each imported under its name, in place of the book of that name. `use` says how the chat
    uses it, as SillyTavern does: `global` (active in every chat: the book's scope becomes global), `chat` (the
    chat's own lore, linked by its metadata, which the chat's sync brings), `character` (its character's lore: each
    of the chat's characters, or those `characters` names, a group's members, is linked to it, as the card's
    `extensions.world` links it, in place of a book it linked before: the client's card is the one its chat uses),
    `extra` (one of its characters' additional books, SillyTavern's Additional Lorebooks: imported only).
    `extra_books` (`[{"character", "books"}]`) sets, for each named character of the chat, its additional books to
    exactly those names, in order (an empty list takes them all off). `not_global` names the client's other books,
    which it does not use globally: a global book of one of those names becomes linked here too, as a book taken
    off SillyTavern's global list is (a book the client does not have keeps the scope it has here). A book the same
    as the one here is not written again, nor is the copy the client sent before, over what was edited here since;
    a version edited here that a new copy replaces is kept as a revision (`_client_copy`). All or nothing: one bad
    book refuses the request, naming the book and the entry."""
    if not isinstance(books, list) or len(books) > MAX_SENT:
        raise ApplicationError(f"`books` is a list of at most {MAX_SENT} books.", {"field": "books"})
    done = []
    for position, item in enumerate(books):
        if not isinstance(item, dict) or item.get("use") not in USES or not isinstance(item.get("name"), str):
            wanted = f"Book {position}: give `name`, `data` and `use` ({', '.join(USES)})."
            raise ApplicationError(wanted, {"field": "books", "book": position})
        try:
            book = _client_copy(user, item)
        except ApplicationError as error:
            where = {**error.extra, "book": position}
            raise ApplicationError(f"{item['name']}: {error.message}", where) from None
        if item["use"] == "global" and book.scope != Lorebook.Scope.GLOBAL:
            book = lorebook_update(book=book, scope=Lorebook.Scope.GLOBAL)
        if item["use"] == "character":
            owners = chat.characters.all()
            if item.get("characters") is not None:
                owners = owners.filter(name__in=item["characters"])
            for character in owners:
                if card_extensions(character.card_data).get("world") != book.name:
                    character_update(
                        character=character, data={"card_data": card_with_world(character.card_data, book.name)}
                    )
        done.append((book, item["use"]))
    if extra_books:
        characters = list(chat.characters.all())
        for item in extra_books:
            names = extra_books_clean(item["books"])
            for character in characters:
                if character.name == item["character"] and character.extra_books != names:
                    character_update(character=character, data={"extra_books": names})
    if not_global:
        sent_global = {book.name for book, use in done if use == "global"}
        names = {name.strip() for name in not_global} - sent_global
        for book in Lorebook.objects.filter(user=user, scope=Lorebook.Scope.GLOBAL, name__in=names):
            lorebook_update(book=book, scope=Lorebook.Scope.LINKED)
    return done


def _client_copy(user: AbstractUser, item: dict[str, Any]) -> Lorebook:
    """The book as the client sent it (services/revisions.py): the same copy it sent before is not taken over what
    was edited here since; one the same as the book is not written again (activation keeps its cache); another is
    imported in its place, the book's version kept as a revision when only this server holds it."""
    name = lorebook_name_clean(item["name"])  # as the import stores it ("Harbour.json" is "Harbour")
    held = Lorebook.objects.select_for_update().filter(user=user, name=name).first()
    sent = book_digest(item.get("data"))
    if held is not None and held.client_digest == sent:
        return held
    export = lorebook_export(book=held) if held is not None else None
    if held is not None and export == item.get("data"):
        client_copy_taken(book=held, sent=sent, export=export)
        return held
    if held is not None and edited_here(book=held, export=export):
        revision_keep(book=held, reason="Replaced by SillyTavern's copy", data=export)
    book = lorebook_import(user=user, name=item["name"], data=item.get("data"), replace=True)
    book.refresh_from_db(fields=["extra"])  # as stored: PostgreSQL gives some numbers back in another form
    client_copy_taken(book=book, sent=sent, export=lorebook_export(book=book))
    return book


@transaction.atomic
def lorebook_revision_restore(*, revision: LorebookRevision) -> Lorebook:
    """The revision's content in place of its book's; the book as it was is kept as a revision first. The client's
    copy stays recorded: sent again unchanged, it does not undo the restore."""
    book = Lorebook.objects.select_for_update().get(pk=revision.lorebook_id, user_id=revision.user_id)
    current = lorebook_export(book=book)
    if book_digest(current) == book_digest(revision.data):
        raise ApplicationError("The book is already as this version has it.", {"field": "revision"}, status=409)
    when = revision.created_at.strftime("%Y-%m-%d %H:%M")
    revision_keep(book=book, reason=f"Before the version of {when} UTC was restored", data=current)
    _content_replace(book, _extra(revision.data), entries_clean(revision.data["entries"]))
    return book


def lorebook_export(*, book: Lorebook) -> dict[str, Any]:
    """The book as SillyTavern's World Info file: the keys it came with, and its entries keyed by uid."""
    return {**book.extra, "entries": {str(entry.uid): entry.data for entry in book.entries.order_by("uid")}}


def export_disposition(name: str) -> str:
    """The Content-Disposition of a book downloaded as `<name>.json`: SillyTavern names a book it imports after
    its file, so the name is kept (only control characters and slashes are replaced)."""
    safe = "".join("_" if char < " " or char in "/\\\x7f" else char for char in name).strip() or "lorebook"
    return content_disposition_header(True, f"{safe}.json")


@transaction.atomic
def lorebook_update(*, book: Lorebook, scope: str | None = None, name: str | None = None) -> Lorebook:
    if scope is not None:
        if scope not in Lorebook.Scope.values:
            raise ApplicationError(f"`scope` is one of {', '.join(Lorebook.Scope.values)}.", {"field": "scope"})
        book.scope = scope
    if name is not None:
        name = lorebook_name_clean(name)
        if Lorebook.objects.filter(user_id=book.user_id, name=name).exclude(id=book.id).exists():
            raise ApplicationError(f"You already have a lorebook named {name!r}.", {"field": "name"}, status=409)
        book.name = name
    # Its own fields only: the clock and entries_version the object holds may be older than the stored ones (its
    # triggers set them), and writing them back would count the write as a sync's, with a clock gone back.
    book.save(update_fields=["scope", "name", "updated_at"])
    return book


@transaction.atomic
def lorebook_delete(*, book: Lorebook) -> None:
    book.delete()


def card_book_entries(book: Any) -> list[dict[str, Any]]:
    """A card's `character_book` as World Info entries, field for field as SillyTavern's `convertCharacterBook`
    converts it, then checked like any entry. A book that is not a list of entries gives none."""
    if not isinstance(book, dict) or not isinstance(book.get("entries"), list):
        return []
    converted = {}
    for index, entry in enumerate(book["entries"]):
        if not isinstance(entry, dict):
            raise ApplicationError(f"The card's book, entry {index}: must be an object.", {"entry": index})
        ext = entry.get("extensions") if isinstance(entry.get("extensions"), dict) else {}
        uid = entry.get("id", index)
        converted[str(uid)] = {
            **{field: default for field, (_, default) in FIELDS.items()},
            "uid": uid,
            "key": entry.get("keys") or [],
            "keysecondary": entry.get("secondary_keys") or [],
            "comment": entry.get("comment") or "",
            "content": entry.get("content") or "",
            "constant": entry.get("constant") or False,
            "selective": entry.get("selective") or False,
            "order": entry.get("insertion_order", 100),
            "position": ext.get("position", 0 if entry.get("position") == "before_char" else 1),
            "excludeRecursion": ext.get("exclude_recursion", False),
            "preventRecursion": ext.get("prevent_recursion", False),
            "delayUntilRecursion": ext.get("delay_until_recursion", False),
            "disable": not entry.get("enabled", True),
            "probability": ext.get("probability", 100),
            "useProbability": ext.get("useProbability", True),
            "depth": ext.get("depth", DEFAULT_DEPTH),
            "selectiveLogic": ext.get("selectiveLogic", 0),
            "outletName": ext.get("outlet_name", ""),
            "group": ext.get("group", ""),
            "groupOverride": ext.get("group_override", False),
            "groupWeight": ext.get("group_weight", DEFAULT_WEIGHT),
            "scanDepth": ext.get("scan_depth"),
            "caseSensitive": ext.get("case_sensitive"),
            "matchWholeWords": ext.get("match_whole_words"),
            "useGroupScoring": ext.get("use_group_scoring"),
            "automationId": ext.get("automation_id", ""),
            "role": ext.get("role", 0),
            "vectorized": ext.get("vectorized", False),
            "sticky": ext.get("sticky"),
            "cooldown": ext.get("cooldown"),
            "delay": ext.get("delay"),
            "matchPersonaDescription": ext.get("match_persona_description", False),
            "matchCharacterDescription": ext.get("match_character_description", False),
            "matchCharacterPersonality": ext.get("match_character_personality", False),
            "matchCharacterDepthPrompt": ext.get("match_character_depth_prompt", False),
            "matchScenario": ext.get("match_scenario", False),
            "matchCreatorNotes": ext.get("match_creator_notes", False),
            "triggers": ext.get("triggers") or [],
            "ignoreBudget": ext.get("ignore_budget", False),
        }
    return entries_clean(converted, label="the card's book, entry")


@transaction.atomic
def entry_save(*, book: Lorebook, uid: int | None, changes: dict[str, Any]) -> LorebookEntry:
    """Sets `changes` (SillyTavern's field names) on the book's entry `uid`, or on a new entry (the first free
    uid, SillyTavern's defaults) when `uid` is None; the result is checked as an imported entry is. The book's
    `updated_at` moves, so activation reads the entry anew."""
    book = Lorebook.objects.select_for_update().get(pk=book.pk)
    if uid is None:
        taken = set(book.entries.values_list("uid", flat=True))
        uid = next(n for n in range(len(taken) + 1) if n not in taken)
        if len(taken) >= MAX_ENTRIES:
            raise ApplicationError(f"A lorebook holds at most {MAX_ENTRIES:,} entries.", {"field": "entries"})
        entry = LorebookEntry(lorebook=book, uid=uid, data={})
    else:
        entry = book.entries.filter(uid=uid).first()
        if entry is None:
            raise ApplicationError("No such entry.", {"field": "uid"}, status=404)
    entry.data = entry_clean({**entry.data, **changes, "uid": uid}, where=f"entry {uid}", fill=True)
    entry.save()
    book.save(update_fields=["updated_at"])
    _vectors_later(book, [entry.data])
    return entry


@transaction.atomic
def entry_delete(*, book: Lorebook, uid: int) -> None:
    deleted, _ = LorebookEntry.objects.filter(lorebook=book, uid=uid).delete()
    if not deleted:
        raise ApplicationError("No such entry.", {"field": "uid"}, status=404)
    Lorebook.objects.filter(pk=book.pk).update(updated_at=timezone.now())
