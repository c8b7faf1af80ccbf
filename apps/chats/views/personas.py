"""The personas page: list, create, edit, delete, make default."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from apps.chats import selectors
from apps.chats.forms import PersonaForm
from apps.chats.services.personas import persona_create, persona_delete, persona_update
from apps.common.exceptions import ApplicationError
from apps.common.forms import posted


def _saved(request, form: PersonaForm, save) -> bool:
    """Run `save` when the form is valid; a domain error lands on the form, under the field it names."""
    if not form.is_valid():
        return False
    try:
        persona = save(form.cleaned_data)
    except ApplicationError as exc:
        form.add_error(exc.extra.get("field") if exc.extra.get("field") in form.fields else None, exc.message)
        return False
    messages.success(request, f"Saved {persona.name}.")
    return True


@login_required
@require_http_methods(["GET", "POST"])
def persona_list(request):
    """The personas, and a form for a new one."""
    form = PersonaForm(posted(request))
    if request.method == "POST" and _saved(request, form, lambda data: persona_create(user=request.user, **data)):
        return redirect("chats:personas")
    personas = selectors.persona_list(user=request.user)
    status = 400 if request.method == "POST" else 200
    return render(request, "chats/persona_list.html", {"personas": personas, "form": form}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def persona_detail(request, persona_id: int):
    persona = selectors.persona_get(user=request.user, persona_id=persona_id)
    initial = {"name": persona.name, "description": persona.description, "is_default": persona.is_default,
               "lorebook": persona.lorebook}  # fmt: skip
    form = PersonaForm(posted(request), initial=initial)
    if request.method == "POST" and _saved(request, form, lambda data: persona_update(persona=persona, data=data)):
        return redirect("chats:personas")
    status = 400 if request.method == "POST" else 200
    return render(request, "chats/persona_detail.html", {"persona": persona, "form": form}, status=status)


@login_required
@require_POST
def persona_default_view(request, persona_id: int):
    persona = selectors.persona_get(user=request.user, persona_id=persona_id)
    persona_update(persona=persona, data={"is_default": True})
    messages.success(request, f"New chats now start with {persona.name}.")
    return redirect("chats:personas")


@login_required
@require_POST
def persona_delete_view(request, persona_id: int):
    persona = selectors.persona_get(user=request.user, persona_id=persona_id)
    name = persona.name
    persona_delete(persona=persona)
    messages.success(request, f"Deleted the persona {name}; its chats keep their names.")
    return redirect("chats:personas")
