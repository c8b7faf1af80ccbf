"""The entry form of the lorebook page (the fields a person sets most, in SillyTavern's words) and the World Info
settings form of the lorebooks page."""

from __future__ import annotations

from typing import Any

from django import forms

from apps.common.forms import TextareaField
from apps.lorebooks.services.fields import LOGICS, MAX_KEY_LENGTH, MAX_KEYS, POSITION_LABELS, ROLES
from apps.lorebooks.services.settings import FIELDS as SETTINGS
from apps.lorebooks.services.settings import STRATEGIES


def _keys(text: str) -> list[str]:
    """Keys as SillyTavern's plain key input takes them: comma-separated, a `/regex/` kept whole. One pass, the
    key so far's characters in a list and whether it holds more than spaces in a flag (stripping it at each "/"
    took the square of its length: a key of 80,000 spaces and slashes, 1.8 s)."""
    keys: list[str] = []
    current: list[str] = []
    in_regex = worded = False
    for char in text:
        if char == "/" and not worded:
            in_regex = True
        elif char == "/" and in_regex and current[-1:] != ["\\"]:
            in_regex = False
            current.append(char)
            continue
        if char == "," and not in_regex:
            keys.append("".join(current).strip())
            current, worded = [], False
            continue
        current.append(char)
        worded = worded or not char.isspace()
    keys.append("".join(current).strip())
    return [key for key in keys if key]


KEYS_LENGTH = MAX_KEYS * (MAX_KEY_LENGTH + 2)  # the most keys, each the longest, and a comma and space between


class EntryForm(forms.Form):
    comment = forms.CharField(label="Title", required=False, max_length=500)
    key = forms.CharField(
        label="Keys", required=False, max_length=KEYS_LENGTH, help_text="Comma-separated; /pattern/flags for a regex."
    )
    keysecondary = forms.CharField(label="Secondary keys", required=False, max_length=KEYS_LENGTH)
    selectiveLogic = forms.TypedChoiceField(label="Secondary logic", choices=list(LOGICS.items()), coerce=int)
    content = TextareaField(widget=forms.Textarea(attrs={"rows": 6}), required=False)
    constant = forms.BooleanField(required=False, help_text="Always in the prompt, without keys.")
    disable = forms.BooleanField(label="Disabled", required=False)
    position = forms.TypedChoiceField(choices=list(POSITION_LABELS.items()), coerce=int)
    depth = forms.IntegerField(min_value=0, max_value=1000, help_text="For “at a depth”: 0 is after the newest.")
    role = forms.TypedChoiceField(choices=list(ROLES.items()), coerce=int, help_text="For “at a depth”.")
    order = forms.IntegerField(label="Insertion order", min_value=-(10**6), max_value=10**6)
    probability = forms.IntegerField(min_value=0, max_value=100)
    scanDepth = forms.IntegerField(label="Scan depth", required=False, min_value=0, max_value=1000,
                                   help_text="Empty: the setting's.")  # fmt: skip
    group = forms.CharField(label="Inclusion group", required=False, max_length=500)
    sticky = forms.IntegerField(required=False, min_value=0, max_value=10**6)
    cooldown = forms.IntegerField(required=False, min_value=0, max_value=10**6)
    delay = forms.IntegerField(required=False, min_value=0, max_value=10**6)

    @classmethod
    def for_entry(cls, data: dict[str, Any] | None = None, **kwargs) -> EntryForm:
        data = data or {}
        initial = {name: data.get(name, field.initial) for name, field in cls.base_fields.items()}
        initial |= {"key": ", ".join(data.get("key") or []), "keysecondary": ", ".join(data.get("keysecondary") or [])}
        for name, default in (("position", 0), ("depth", 4), ("role", 0), ("order", 100), ("probability", 100),
                              ("selectiveLogic", 0)):  # fmt: skip
            if initial.get(name) is None:
                initial[name] = default
        return cls(initial=initial, **kwargs)

    def changes(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        data["key"], data["keysecondary"] = _keys(data["key"]), _keys(data["keysecondary"])
        data["useProbability"] = True
        return data


class ChatLoreForm(forms.Form):
    """The book a chat links, among the person's (a name it links that none of theirs has stays offered, marked)."""

    book = forms.ChoiceField(
        required=False, label="Chat lore", error_messages={"invalid_choice": "Not one of your lorebooks."}
    )

    def __init__(self, *args: Any, names: list[str], current: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [("", "None (the character's and global books only)"), *((name, name) for name in names)]
        if current and current not in names:
            choices.append((current, f"{current} (not imported: nothing is read)"))
        self.fields["book"].choices = choices


class LoreSettingsForm(forms.Form):
    """SillyTavern's World Info settings (apps/lorebooks/services/settings.py), with its bounds."""

    integrity = forms.UUIDField(widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, (kind, low, high, label) in SETTINGS.items():
            if name == "character_strategy":
                self.fields[name] = forms.TypedChoiceField(label=label, choices=list(STRATEGIES.items()), coerce=int)
            elif kind is bool:
                self.fields[name] = forms.BooleanField(label=label, required=False)
            else:
                self.fields[name] = forms.IntegerField(label=label, min_value=low, max_value=high)
