"""Starting a chat from the pages (with a character, or a group from the characters list), branching one at a
message, and changing a chat's persona and a group's reply order."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event

from apps.chats import selectors
from apps.chats.forms import BranchForm, ChatPersonaForm, ChatReplyOrderForm, ChatStartForm
from apps.chats.services.branch import chat_branch
from apps.chats.services.chats import chat_update
from apps.chats.services.start import chat_start
from apps.common.exceptions import ApplicationError
from apps.common.forms import posted
from apps.common.ids import id_from
from apps.common.panels import form_problem, panel_form


def _to(request, url: str):
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _start(request, form: ChatStartForm, character_ids: list[int], back: str):
    """Start the chat the valid form asks for and go to it; else back, saying why."""
    if not form.is_valid():
        messages.error(request, f"The chat was not started: {form_problem(form)}.")
        return _to(request, back)
    data = form.cleaned_data
    characters = selectors.characters_get(user=request.user, character_ids=character_ids)
    persona = selectors.persona_get(user=request.user, persona_id=int(data["persona"])) if data["persona"] else None
    try:
        chat = chat_start(
            user=request.user,
            characters=characters,
            persona=persona,
            title=data["title"],
            reply_order=data["reply_order"] or "natural",
        )
    except ApplicationError as exc:
        messages.error(request, f"The chat was not started: {exc.message}")
        return _to(request, back)
    return _to(request, reverse("chats:detail", args=[chat.pk]))


@login_required
@require_POST
def character_chat_start(request, character_id: int):
    """The character page's "New chat": a chat with this character, the chosen persona, then to the chat."""
    character = selectors.character_get(user=request.user, character_id=character_id)
    personas = list(selectors.persona_list(user=request.user))
    form = ChatStartForm(request.POST, personas=personas)
    return _start(request, form, [character.pk], reverse("chats:character", args=[character.pk]))


@login_required
@require_POST
def group_chat_start(request):
    """The characters list's "Start a group chat": the ticked characters (in the list's order), the persona and the
    reply order chosen."""
    personas = list(selectors.persona_list(user=request.user))
    ticked = [found for value in request.POST.getlist("characters") if (found := id_from(value)) is not None]
    choices = selectors.characters_get(user=request.user, character_ids=ticked)
    form = ChatStartForm(request.POST, personas=personas, character_choices=choices)
    if form.is_valid() and not form.cleaned_data["characters"]:
        form.add_error("characters", "Tick the characters who take part.")
    ids = [character.pk for character in choices]
    return _start(request, form, ids, reverse("chats:characters"))


@login_required
@require_POST
def chat_branch_view(request, chat_id: int):
    """A new chat holding the messages up to `index`; to it, or back to the chat saying why not."""
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    form = BranchForm(request.POST)
    back = reverse("chats:detail", args=[chat.pk])
    if not form.is_valid():
        messages.error(request, f"No branch made: {form_problem(form)}.")
        return _to(request, back)
    try:
        branch = chat_branch(chat=chat, index=form.cleaned_data["index"])
    except ApplicationError as exc:
        messages.error(request, f"No branch made: {exc.message}")
        return _to(request, back)
    messages.success(request, f"Branched “{chat.title}” at message #{form.cleaned_data['index']}.")
    return _to(request, reverse("chats:detail", args=[branch.pk]))


@login_required
@require_http_methods(["GET", "POST"])
def chat_persona(request, chat_id: int):
    """The chat's persona: GET the small form (a fragment a chat page can load with htmx), POST a choice (a
    persona id, or empty for none). An htmx POST answers the form again; another, a redirect to the chat."""
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    personas = list(selectors.persona_list(user=request.user))
    return panel_form(
        request,
        form=ChatPersonaForm(posted(request), personas=personas, initial={"persona": chat.persona_id or ""}),
        save=lambda data: chat_update(chat=chat, data={"persona": int(data["persona"]) if data["persona"] else None}),
        fresh=lambda saved: ChatPersonaForm(personas=personas, initial={"persona": saved.persona_id or ""}),
        template="chats/partials/chat_persona.html",
        context={"chat": chat},
        done="Changed the chat's persona.",
        failed="The persona was not changed",
        back=reverse("chats:detail", args=[chat.pk]),
    )


@login_required
@require_http_methods(["GET", "POST"])
def chat_reply_order(request, chat_id: int):
    """A group chat's reply order, as chat_persona changes the persona: GET the small form (the chat page loads it
    for a group), POST a choice. It was set only when the group was started."""
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    changed: list[str] = []

    def save(data):
        changed.append(data["reply_order"])
        return chat_update(chat=chat, data={"reply_order": data["reply_order"]})

    response = panel_form(
        request,
        form=ChatReplyOrderForm(posted(request), initial={"reply_order": chat.reply_order}),
        save=save,
        fresh=lambda saved: ChatReplyOrderForm(initial={"reply_order": saved.reply_order}),
        template="chats/partials/chat_reply_order.html",
        context={"chat": chat},
        done="Changed who replies in this chat.",
        failed="Who replies was not changed",
        back=reverse("chats:detail", args=[chat.pk]),
    )
    if changed and request.htmx:  # the composer's Options follow (static/js/chat-compose.js)
        trigger_client_event(response, "lorekeeper:reply-order", {"order": changed[0]})
    return response
