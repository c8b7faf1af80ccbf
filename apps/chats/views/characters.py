"""Pages for characters: the list, a card (shown, edited, deleted), card import, and the avatar."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from apps.chats import selectors
from apps.chats.forms import AvatarForm, CharacterCardForm, CharacterForm, ChatStartForm
from apps.chats.services.avatars import avatar_content_type, character_avatar_clear, character_avatar_upload
from apps.chats.services.cards import character_import_card
from apps.chats.services.characters import (
    card_book,
    character_card_fields,
    character_create,
    character_delete,
    character_delete_counts,
    character_update,
)
from apps.common.exceptions import ApplicationError
from apps.common.forms import posted

CHARACTERS_PER_PAGE = 25


@login_required
@require_GET
@vary_on_headers("HX-Request")
def character_list(request):
    search = request.GET.get("q", "").strip()
    characters = selectors.character_list_counted(user=request.user, search=search)
    page = Paginator(characters, CHARACTERS_PER_PAGE).get_page(request.GET.get("page"))
    personas = list(selectors.persona_list(user=request.user))
    context = {
        "page": page,
        "search": search,
        "card_form": CharacterCardForm(),
        "start_form": ChatStartForm(personas=personas),
    }
    template = "chats/character_list.html#character-results" if request.htmx else "chats/character_list.html"
    return render(request, template, context)


@login_required
@require_POST
def character_import_view(request):
    form = CharacterCardForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            character = character_import_card(user=request.user, stream=form.cleaned_data["file"])
        except ApplicationError as exc:
            form.add_error("file", exc.message)
        else:
            messages.success(request, f"Imported the card of {character.name}.")
            return redirect("chats:character", character.pk)
    for error in form.errors.get("file", []):
        messages.error(request, error)
    return redirect("chats:characters")


@login_required
@require_http_methods(["GET", "POST"])
def character_detail(request, character_id: int | None = None):
    """Shows and edits a card; without an id, makes a new one."""
    character = selectors.character_get(user=request.user, character_id=character_id) if character_id else None
    initial = None
    if character is not None:
        initial = {
            field: getattr(character, field) for field in CharacterForm.base_fields if hasattr(character, field)
        }
        initial.update(
            character_card_fields(character),
            tags=", ".join(character.tags),
            extra_books="\n".join(character.extra_books or []),
        )
    form = CharacterForm(posted(request), initial=initial)
    if request.method == "POST" and form.is_valid():
        if character is None:
            character = character_create(user=request.user, **form.cleaned_data)
        else:
            character = character_update(character=character, data=form.cleaned_data)
        messages.success(request, f"Saved {character.name}.")
        return redirect("chats:character", character.pk)
    chats = selectors.chat_list(user=request.user, character=character)[:50] if character else []
    context = {"character": character, "form": form, "chats": chats}
    if character is not None:
        context["card_book"] = card_book(character)
        personas = list(selectors.persona_list(user=request.user))
        context.update(start_form=ChatStartForm(personas=personas), avatar_form=AvatarForm())
    return render(request, "chats/character_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def character_delete_view(request, character_id: int):
    """A page that says what goes with the character (how many memories) before the deletion it confirms."""
    character = selectors.character_get(user=request.user, character_id=character_id)
    if request.method == "GET":
        counts = character_delete_counts(character=character)
        chats = selectors.chat_count(user=request.user, character=character)
        context = {"character": character, "counts": counts, "chats": chats}
        return render(request, "chats/character_delete.html", context)
    counts = character_delete(character=character, delete_chat_memories=request.POST.get("chat_memories") == "delete")
    deleted, kept = counts["memories_deleted"], counts["memories_kept"]
    note = (
        f" {kept} memor{pluralize(kept, 'y,ies')} drawn from their chats {pluralize(kept, 'is,are')} kept."
        if kept
        else ""
    )
    messages.success(
        request,
        f"Deleted {character.name} and {deleted} memor{pluralize(deleted, 'y,ies')}; their chats are kept.{note}",
    )
    return redirect("chats:characters")


@login_required
@require_http_methods(["GET", "POST"])
def character_avatar(request, character_id: int):
    """GET: the avatar, to its owner only (MEDIA is never served directly), 404 when there is none. POST: upload
    one in its place (`avatar`), or remove it (`remove`); back to the character's page, saying what happened."""
    character = selectors.character_get(user=request.user, character_id=character_id)
    if request.method == "GET":
        if not character.avatar:
            raise Http404("No avatar.")
        try:
            stream = character.avatar.open("rb")
        except OSError as exc:
            raise Http404("No avatar.") from exc
        response = FileResponse(stream, content_type=avatar_content_type(character))
        response["Cache-Control"] = "private, max-age=3600"
        response["Content-Security-Policy"] = "default-src 'none'"
        return response
    form = AvatarForm(request.POST, request.FILES)
    if form.is_valid() and form.cleaned_data["remove"]:
        character_avatar_clear(character=character)
        messages.success(request, f"Removed the avatar of {character.name}.")
    elif form.is_valid() and form.cleaned_data["avatar"]:
        try:
            character_avatar_upload(character=character, stream=form.cleaned_data["avatar"])
        except ApplicationError as exc:
            messages.error(request, f"Avatar not changed: {exc.message}")
        else:
            messages.success(request, f"New avatar for {character.name}.")
    else:
        messages.error(request, "Avatar not changed: choose an image file (PNG, JPEG or WebP, at most 5 MB).")
    return redirect("chats:character", character.pk)
