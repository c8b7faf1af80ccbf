from django import forms


class ChatImportForm(forms.Form):
    file = forms.FileField(help_text="A SillyTavern chat file (.jsonl).")
    title = forms.CharField(max_length=300, required=False, help_text="Defaults to the file's name.")
    # Set by the chat page's "Replace with a newer file": the file goes over that chat instead of making a new one.
    replace = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)


class CharacterCardForm(forms.Form):
    file = forms.FileField(help_text="A character card: SillyTavern PNG or JSON (V1, V2 or V3).")


class CharacterForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False, strip=False)
    personality = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False, strip=False)
    scenario = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, strip=False)
    first_mes = forms.CharField(
        label="First message", widget=forms.Textarea(attrs={"rows": 4}), required=False, strip=False
    )
    mes_example = forms.CharField(
        label="Example messages", widget=forms.Textarea(attrs={"rows": 4}), required=False, strip=False
    )
    system_prompt = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, strip=False)
    creator_notes = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False, strip=False)
    tags = forms.CharField(required=False, help_text="Comma-separated.")

    def clean_tags(self) -> list[str]:
        return [tag.strip()[:100] for tag in self.cleaned_data["tags"].split(",") if tag.strip()]
