"""The shapes the memory browser accepts; domain rules stay in the services."""

from django import forms

from apps.common.forms import TextareaField
from apps.common.ids import id_from
from apps.common.serializers import INT_MAX
from apps.memories.embeddings import DEFAULT_MODELS
from apps.memories.models import Kind, Status

STATUS_ALL = "all"
EDITABLE_KINDS = [(value, label) for value, label in Kind.choices if value != Kind.MESSAGE]
TIME_SCOPES = [("", "—"), ("scene", "Scene"), ("session", "Session"), ("permanent", "Permanent")]
PROVIDERS = [
    ("deployment", "Deployment default"),
    ("local", "Local (sentence-transformers)"),
    ("openai", "OpenAI-compatible /v1/embeddings"),
    ("ollama", "Ollama /api/embed"),
    ("none", "None (text search only)"),
]


def _split_list(text: str) -> list[str]:
    return list(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))


class EntityChoiceField(forms.ModelChoiceField):
    """Entities of two registries may share a name: say whose each one is."""

    def label_from_instance(self, entity) -> str:
        owner = entity.character.name if entity.character_id else "user-wide"
        return f"{entity.name} ({owner})"


class MemoryFilterForm(forms.Form):
    """The browser's filters and search box (GET). An empty `q` browses; a non-empty one searches."""

    q = forms.CharField(required=False, max_length=2000, label="Search")
    kind = forms.ChoiceField(choices=[("", "All kinds"), *Kind.choices], required=False)
    messages = forms.BooleanField(required=False, label="Show chat messages")
    status = forms.ChoiceField(
        choices=[(Status.ACTIVE, "Active"), (Status.RETIRED, "Retired"), (STATUS_ALL, "Active and retired")],
        required=False,
    )
    entity = EntityChoiceField(queryset=None, required=False, empty_label="Any entity")

    def __init__(self, *args, entities, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["entity"].queryset = entities.select_related("character").order_by("name", "id")

    def clean_q(self) -> str:
        return self.cleaned_data["q"].replace("\x00", "").strip()

    def clean_status(self) -> str:
        return self.cleaned_data["status"] or Status.ACTIVE


class MemoryEditForm(forms.Form):
    # The version the form was opened at: saving over a newer one is refused (apps.memories.services.memories).
    version = forms.IntegerField(
        min_value=1,
        widget=forms.HiddenInput,
        error_messages={"required": "This form does not say which version it edits: reload the page and edit again."},
    )
    content = TextareaField(widget=forms.Textarea(attrs={"rows": 6}), max_length=50_000)
    kind = forms.ChoiceField(choices=EDITABLE_KINDS)
    importance = forms.TypedChoiceField(choices=[(1, "1 · minor"), (2, "2 · normal"), (3, "3 · major")], coerce=int)
    confidence = forms.FloatField(
        min_value=0, max_value=1, widget=forms.NumberInput(attrs={"step": "0.05"}), help_text="0 to 1."
    )
    time_scope = forms.ChoiceField(choices=TIME_SCOPES, required=False)
    valid_from = forms.IntegerField(
        min_value=0, max_value=INT_MAX, required=False, help_text="Index of the message from which it holds."
    )
    valid_to = forms.IntegerField(
        min_value=0, max_value=INT_MAX, required=False, help_text="Index of the message at which it stopped."
    )

    def clean(self):
        data = super().clean()
        start, end = data.get("valid_from"), data.get("valid_to")
        if start is not None and end is not None and end < start:
            self.add_error("valid_to", "Must not be before “valid from”.")
        return data


class EntityForm(forms.Form):
    name = forms.CharField(max_length=200)
    type = forms.CharField(max_length=50, required=False, help_text="person, place, object, faction…")
    aliases = forms.CharField(required=False, max_length=5000, help_text="Comma-separated.")

    def clean_aliases(self) -> list[str]:
        aliases = _split_list(self.cleaned_data["aliases"])
        if len(aliases) > 50:
            raise forms.ValidationError("At most 50 aliases.")
        if any(len(alias) > 200 for alias in aliases):
            raise forms.ValidationError("An alias is at most 200 characters.")
        return aliases


class EntityRenameForm(forms.Form):
    name = forms.CharField(max_length=200, label="New name")


MAX_MERGED = 100


class EntityIdsField(forms.Field):
    """Entities chosen by checkbox or hidden input (their ids, each given once)."""

    widget = forms.MultipleHiddenInput
    default_error_messages = {"invalid": "Choose entities from the list."}

    def to_python(self, value) -> list[int]:
        values = value or []
        if not isinstance(values, list | tuple):
            values = [values]
        read = [id_from(str(item)) for item in values]  # "-1", " 5" and "٥" are no ids
        ids = list(dict.fromkeys(read))
        if None in ids or 0 in ids:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        if len(ids) > MAX_MERGED:
            raise forms.ValidationError(f"At most {MAX_MERGED} entities at a time.", code="max")
        return ids


class EntityMergeForm(forms.Form):
    """Which entities become one (`merge`), and the one kept (`into`, which may be among them or not)."""

    merge = EntityIdsField(required=False)
    into = forms.IntegerField(min_value=1, max_value=2**63 - 1, required=False, label="Keep")

    def __init__(self, *args, keep_required: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.keep_required = keep_required

    def clean(self):
        data = super().clean()
        into = data.get("into")
        if "merge" in data and len({*data["merge"], into} - {None}) < 2:
            self.add_error("merge", "Choose at least two entities to merge.")
        elif self.keep_required and into is None and "into" not in self.errors:
            self.add_error("into", "Choose the entity to keep.")
        return data


class EmbeddingSettingsForm(forms.Form):
    provider = forms.ChoiceField(choices=PROVIDERS)
    model = forms.CharField(
        max_length=200,
        required=False,
        help_text="Empty for the provider's default: "
        + ", ".join(f"{name} {model}" for name, model in DEFAULT_MODELS.items())
        + ".",
    )
    base_url = forms.URLField(
        assume_scheme="http",
        max_length=500,
        required=False,
        label="Base URL",
        help_text="e.g. http://localhost:11434 for Ollama.",
    )
    api_key = forms.CharField(
        max_length=500,
        required=False,
        label="API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted and never shown. Leave empty to keep the stored key.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Clear the stored key")
    dimensions = forms.IntegerField(
        min_value=1, max_value=4096, required=False, help_text="Ask the provider for vectors of this size (optional)."
    )

    def clean(self):
        data = super().clean()
        if data.get("api_key") and data.get("clear_api_key"):
            self.add_error("api_key", "Enter a new key or clear the stored one, not both.")
        return data


class LifecycleSettingsForm(forms.Form):
    time_zone = forms.CharField(
        max_length=64,
        widget=forms.TextInput(attrs={"list": "time-zones"}),
        help_text="IANA name (Europe/Paris, America/New_York): summaries are built at 05:00 there.",
    )
    hierarchy_enabled = forms.BooleanField(required=False, label="Build daily, weekly, monthly and yearly summaries")


class HierarchyRunForm(forms.Form):
    granularity = forms.ChoiceField(
        choices=[("", "every due period"), *((level, level) for level in ("daily", "weekly", "monthly", "yearly"))],
        required=False,
    )
    period = forms.CharField(max_length=20, required=False, help_text="2026-11-21, 2026-W47, 2026-11 or 2026")
