from django import forms


class ChatImportForm(forms.Form):
    file = forms.FileField(help_text="A SillyTavern chat file (.jsonl).")
    title = forms.CharField(max_length=300, required=False, help_text="Defaults to the file's name.")
