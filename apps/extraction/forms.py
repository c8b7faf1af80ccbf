"""The shapes the extraction pages accept; domain rules stay in the services."""

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator

from apps.extraction.models import ExtractionSettings
from apps.extraction.services.pipeline import BY_HAND
from apps.extraction.services.settings import RANGES
from apps.llm.selectors import daily_limit


class ExtractionSettingsForm(forms.ModelForm):
    class Meta:
        model = ExtractionSettings
        fields = [
            "enabled",
            "auto_extract",
            "batch_every",
            "batch_max",
            "context_tokens",
            "compaction_share",
            "min_scene_messages",
            "scene_model_check",
            "profile_every",
            "profile_stale_minutes",
            "canon_auto",
            "continuity_auto",
            "recap_after_hours",
            "auto_rebuild_max",
        ]
        labels = {"auto_extract": "Extract every chat's history automatically"}
        widgets = {
            "compaction_share": forms.NumberInput(attrs={"step": "0.05"}),
            "recap_after_hours": forms.NumberInput(attrs={"step": "0.5"}),
        }

    daily_token_limit = forms.IntegerField(
        required=False,
        min_value=1000,
        label="Daily token limit for background work",
        help_text="Prompt and reply tokens a day; past it, background work pauses until midnight. Empty: no limit.",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.instance is not None:
            self.fields["daily_token_limit"].initial = daily_limit(user_id=self.instance.user_id)
        # The service's ranges, on the fields: a value out of range is explained where it was typed (before the
        # model's own constraints would be checked and reported at the top of the form).
        for name, (low, high) in RANGES.items():
            field = self.fields[name]
            message = f"Between {low:g} and {high:g}."
            field.validators += [MinValueValidator(low, message=message), MaxValueValidator(high, message=message)]
            field.widget.attrs.update(min=low, max=high)


class RebuildForm(forms.Form):
    from_index = forms.IntegerField(min_value=0, label="Rebuild from message #")


class RunForm(forms.Form):
    tier = forms.ChoiceField(choices=[(key, key) for key in BY_HAND])


class SceneForm(forms.Form):
    name = forms.CharField(max_length=200, required=False)


class SceneVersionForm(forms.Form):
    current_version = forms.IntegerField(min_value=0)
