from django import forms
from django.utils.html import format_html, format_html_join

from apps.chats.models import ReplyOrder
from apps.chats.services.characters import MAX_BOOK_NAME, MAX_EXTRA_BOOKS, extra_books_clean
from apps.common.forms import TextareaField, as_typed

MAX_ALTERNATE_GREETINGS = 100


class TextareaList(forms.Widget):
    """One textarea per item and an empty one for a new item, all under the field's name (SillyTavern edits each
    alternate greeting in a box of its own). Saving with a box emptied removes that item."""

    def __init__(self, attrs=None, item_label: str = "Item"):
        super().__init__(attrs)
        self.item_label = item_label

    def value_from_datadict(self, data, files, name):
        return data.getlist(name) if hasattr(data, "getlist") else data.get(name, [])

    def value_omitted_from_data(self, data, files, name):
        return name not in data

    def render(self, name, value, attrs=None, renderer=None):
        items = [*(value or []), ""]
        base_id = (attrs or {}).get("id") or f"id_{name}"
        rows = self.attrs.get("rows", 3)
        boxes = format_html_join(
            "",
            '<textarea name="{}" id="{}" rows="{}" aria-label="{} {}">\n{}</textarea>',
            (
                (
                    name,
                    base_id if n == 0 else f"{base_id}_{n}",
                    rows,
                    self.item_label,
                    n + 1 if text else "(new)",
                    text,
                )
                for n, text in enumerate(items)
            ),
        )
        return format_html('<span class="textarea-list">{}</span>', boxes)


class TextListField(forms.Field):
    """A list of texts kept as typed (not stripped); empty ones are dropped."""

    widget = TextareaList

    def __init__(self, *, max_items: int, **kwargs):
        self.max_items = max_items
        super().__init__(**kwargs)

    def to_python(self, value) -> list[str]:
        if value in self.empty_values:
            return []
        items = [value] if isinstance(value, str) else list(value)
        return [as_typed(item) for item in items if isinstance(item, str) and item.strip()]

    def validate(self, value: list[str]) -> None:
        super().validate(value)
        if any("\x00" in item for item in value):  # as Django's CharField refuses: PostgreSQL cannot store one
            raise forms.ValidationError(f"{self.label}: a NUL character cannot be stored.", code="null_characters")
        if len(value) > self.max_items:
            raise forms.ValidationError(
                f"{self.label}: at most %(max)d, not %(count)d.",
                code="max_items",
                params={"max": self.max_items, "count": len(value)},
            )


class ChatImportForm(forms.Form):
    file = forms.FileField(help_text="A SillyTavern chat file (.jsonl).")
    title = forms.CharField(max_length=300, required=False, help_text="Defaults to the file's name.")
    # Set by the chat page's "Replace with a newer file": the file goes over that chat instead of making a new one.
    replace = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)


class CharacterCardForm(forms.Form):
    file = forms.FileField(help_text="A character card: SillyTavern PNG or JSON (V1, V2 or V3).")


class CharacterForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = TextareaField(widget=forms.Textarea(attrs={"rows": 5}), required=False, strip=False)
    personality = TextareaField(widget=forms.Textarea(attrs={"rows": 2}), required=False, strip=False)
    scenario = TextareaField(widget=forms.Textarea(attrs={"rows": 3}), required=False, strip=False)
    first_mes = TextareaField(
        label="First message", widget=forms.Textarea(attrs={"rows": 4}), required=False, strip=False
    )
    mes_example = TextareaField(
        label="Example messages", widget=forms.Textarea(attrs={"rows": 4}), required=False, strip=False
    )
    system_prompt = TextareaField(widget=forms.Textarea(attrs={"rows": 3}), required=False, strip=False)
    alternate_greetings = TextListField(
        label="Alternate greetings",
        max_items=MAX_ALTERNATE_GREETINGS,
        required=False,
        widget=TextareaList(attrs={"rows": 3}, item_label="Alternate greeting"),
        help_text="Each one a swipe of the first message when a chat starts. Empty a box to remove its greeting.",
    )
    post_history_instructions = TextareaField(
        label="Post-history instructions",
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        strip=False,
        help_text="Sent after the chat history, just before the reply (SillyTavern's jailbreak slot).",
    )
    creator_notes = TextareaField(widget=forms.Textarea(attrs={"rows": 2}), required=False, strip=False)
    tags = forms.CharField(required=False, help_text="Comma-separated.")
    extra_books = TextareaField(
        label="Additional lorebooks",
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        help_text="The names of your lorebooks its chats scan besides the one its card links, one a line "
        "(SillyTavern's Additional Lorebooks).",
    )

    def clean_tags(self) -> list[str]:
        return [tag.strip()[:100] for tag in self.cleaned_data["tags"].split(",") if tag.strip()]

    def clean_extra_books(self) -> list[str]:
        names = extra_books_clean(self.cleaned_data["extra_books"].splitlines())
        if len(names) > MAX_EXTRA_BOOKS:
            raise forms.ValidationError(f"At most {MAX_EXTRA_BOOKS} additional lorebooks, not {len(names)}.")
        if any(len(name) > MAX_BOOK_NAME for name in names):
            raise forms.ValidationError(f"A lorebook's name is at most {MAX_BOOK_NAME} characters.")
        return names


class AvatarForm(forms.Form):
    avatar = forms.FileField(
        required=False, help_text="PNG, JPEG or WebP, at most 5 MB (checked by its content, not its name)."
    )
    remove = forms.BooleanField(required=False)


class PersonaForm(forms.Form):
    name = forms.CharField(max_length=100)
    description = TextareaField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        strip=False,
        help_text="Who you are in the story: the model reads it with every reply.",
    )
    is_default = forms.BooleanField(required=False, label="Default", help_text="New chats start with this persona.")
    lorebook = forms.CharField(
        max_length=200,
        required=False,
        label="Lorebook",
        help_text="The name of one of your lorebooks: its chats scan it too (SillyTavern's persona lore).",
    )


def _persona_choices(personas) -> list[tuple[str, str]]:
    return [(str(p.pk), f"{p.name} (default)" if p.is_default else p.name) for p in personas]


class ChatStartForm(forms.Form):
    """Starting a chat from the pages: the persona among the person's own (the view gives them), the default first."""

    persona = forms.ChoiceField(required=False)
    title = forms.CharField(max_length=300, required=False, help_text="By default the characters' names and the date.")
    reply_order = forms.ChoiceField(choices=ReplyOrder.choices, required=False, initial=ReplyOrder.NATURAL)
    characters = forms.TypedMultipleChoiceField(coerce=int, required=False)

    def __init__(self, *args, personas=(), character_choices=(), **kwargs):
        super().__init__(*args, **kwargs)
        default = next((p for p in personas if p.is_default), None)
        # Without a choice the chat takes the default persona: "no persona" is a choice only when there is none.
        none = [] if default is not None else [("", "You (no persona)")]
        self.fields["persona"].choices = [*none, *_persona_choices(personas)]
        if default is not None:
            self.fields["persona"].initial = str(default.pk)
        self.fields["characters"].choices = [(str(c.pk), c.name) for c in character_choices]


class BranchForm(forms.Form):
    index = forms.IntegerField(min_value=0)


class ChatPersonaForm(forms.Form):
    persona = forms.ChoiceField(
        required=False, label="Persona", error_messages={"invalid_choice": "Not one of your personas."}
    )

    def __init__(self, *args, personas=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["persona"].choices = [("", "None (the chat's own user name)"), *_persona_choices(personas)]


class ChatReplyOrderForm(forms.Form):
    reply_order = forms.ChoiceField(
        choices=ReplyOrder.choices, label="Who replies",
        error_messages={"invalid_choice": f"Not a reply order: one of {', '.join(ReplyOrder.values)}."},
    )  # fmt: skip
