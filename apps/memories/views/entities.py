"""The entity pages: the registries (the user-wide one and each character's), an entity with its memories, and
editing them by hand: renaming, and merging entities of one registry that are one person, place or thing."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect

from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.common.ids import id_from
from apps.memories import selectors
from apps.memories.forms import EntityForm, EntityMergeForm, EntityRenameForm
from apps.memories.models import Entity
from apps.memories.services.entities import entities_merge, entities_merge_check, entity_rename, entity_update
from apps.memories.views.browser import MEMORIES_PER_PAGE, error_field

ENTITIES_PER_PAGE = 50
HEAD = "memories/entity_detail.html#entity-head"


@login_required
@require_GET
@vary_on_headers("HX-Request")
def entity_list(request):
    """The user-wide registry and every character's, or with `?character=` that character's and the user-wide."""
    character = None
    raw = request.GET.get("character", "")
    if raw:
        character_id = id_from(raw)
        if character_id is None:
            return render(request, "memories/entity_list.html", {"error": "Unknown character."}, status=400)
        character = chat_selectors.character_get(user=request.user, character_id=character_id)
    search = request.GET.get("q", "").strip()
    entities = selectors.entity_list_by_name(
        user=request.user, character_id=character.pk if character else None, search=search
    )
    page = Paginator(entities, ENTITIES_PER_PAGE).get_page(request.GET.get("page"))
    context = {"character": character, "page": page, "search": search}
    template = "memories/entity_list.html#entity-results" if request.htmx else "memories/entity_list.html"
    return render(request, template, context)


def _edit_form(entity: Entity) -> EntityForm:
    return EntityForm(initial={"name": entity.name, "type": entity.type, "aliases": ", ".join(entity.aliases)})


def _head(request, entity: Entity, **extra) -> dict:
    """What the entity's head shows: its edit forms (closed unless they hold errors) and what it may merge into."""
    return {
        "entity": entity,
        "form": _edit_form(entity),
        "rename_form": EntityRenameForm(initial={"name": entity.name}),
        "merge_choices": selectors.entity_registry(user=request.user, entity=entity),
        **extra,
    }


def _memories(request, entity: Entity) -> dict:
    memories = selectors.with_display(selectors.memory_list(user=request.user, entity_id=entity.pk))
    return {"entity": entity, "page": Paginator(memories, MEMORIES_PER_PAGE).get_page(request.GET.get("page"))}


def _detail_page(request, entity: Entity, *, status: int = 200, **head):
    context = {**_head(request, entity, **head), **_memories(request, entity)}
    return render(request, "memories/entity_detail.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def entity_detail(request, entity_id: int):
    """An entity, its edit form, and the memories linked to it (paged)."""
    entity = selectors.entity_get(user=request.user, entity_id=entity_id)
    if request.method == "GET":
        if request.htmx:
            return render(request, "memories/entity_detail.html#entity-memories", _memories(request, entity))
        return _detail_page(request, entity)
    form = EntityForm(request.POST)
    if form.is_valid():
        try:
            entity = entity_update(user=request.user, entity=entity, data=form.cleaned_data)
        except ApplicationError as exc:
            form.add_error(error_field(exc, form, "name"), exc.message)
        else:
            if not request.htmx:
                messages.success(request, f"Saved {entity.name}.")
                return redirect("memories:entity", entity.pk)
            return render(request, HEAD, _head(request, entity, saved=True))
    if request.htmx:
        return render(request, HEAD, _head(request, entity, form=form), status=400)
    return _detail_page(request, entity, status=400, form=form)


@login_required
@require_POST
def entity_rename_view(request, entity_id: int):
    """A new name; the old one stays as an alias. A name another entity of the registry goes by is refused, with
    the suggestion to merge."""
    entity = selectors.entity_get(user=request.user, entity_id=entity_id)
    form = EntityRenameForm(request.POST)
    if form.is_valid():
        old = entity.name
        try:
            entity = entity_rename(user=request.user, entity=entity, name=form.cleaned_data["name"])
        except ApplicationError as exc:
            form.add_error("name", exc.message)
        else:
            notice = f"Renamed. “{old}” stays as an alias." if old.casefold() != entity.name.casefold() else "Saved."
            if not request.htmx:
                messages.success(request, notice)
                return redirect("memories:entity", entity.pk)
            return render(request, HEAD, _head(request, entity, notice=notice))
    if request.htmx:
        context = _head(request, entity, rename_form=form)
        return render(request, HEAD, context, status=400)
    return _detail_page(request, entity, status=400, rename_form=form)


def _names(entities: list[Entity]) -> str:
    quoted = [f"“{entity.name}”" for entity in entities]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def entity_merge_view(request):
    """Entities of one registry that are one become one. GET (`merge`: the entities, `into`: the one to keep, if
    chosen yet) asks which to keep and for a confirmation; POST merges and goes to the entity kept."""
    posted = request.method == "POST"
    form = EntityMergeForm(request.POST if posted else request.GET, keep_required=posted)
    valid = form.is_valid()
    into = form.cleaned_data.get("into")
    entities, keep = [], None
    if "merge" in form.cleaned_data:
        ids = list(dict.fromkeys([*form.cleaned_data["merge"], *([into] if into else [])]))
        entities = selectors.entities_get(user=request.user, entity_ids=ids)
        keep = next((entity for entity in entities if entity.pk == into), None)
        try:
            entities_merge_check(entities=entities)
            if valid and posted:
                merged = [entity for entity in entities if entity.pk != keep.pk]
                kept = entities_merge(user=request.user, keep=keep, merge=merged)
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            if valid and posted:
                messages.success(
                    request,
                    f"Merged {_names(merged)} into “{kept.name}”: their memories are linked to it, their names kept "
                    "as its aliases.",
                )
                url = reverse("memories:entity", args=[kept.pk])
                return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    context = {"form": form, "entities": entities, "keep": keep}
    template = "memories/entity_merge.html#merge-confirm" if request.htmx else "memories/entity_merge.html"
    return render(request, template, context, status=400 if form.errors else 200)
