from django import forms

from apps.llm.models import Connection


class ConnectionForm(forms.Form):
    name = forms.CharField(max_length=100)
    api = forms.ChoiceField(choices=Connection.Api.choices, label="API")
    base_url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        label="Base URL",
        help_text="https://api.openai.com/v1, http://host:11434/v1 (Ollama's "
        "OpenAI layer), http://host:11434 (Ollama's own API), a vLLM, llama.cpp or LM Studio server.",
    )
    model = forms.CharField(max_length=200)
    api_key = forms.CharField(
        max_length=500,
        required=False,
        label="API key",
        widget=forms.PasswordInput(render_value=False),
        help_text="Stored encrypted and never shown again. Leave empty to keep the stored one.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored key")
    profile = forms.ChoiceField(choices=Connection.ProfileChoice.choices, label="Hardware profile")
    context_window = forms.IntegerField(required=False, min_value=512, help_text="Tokens (default by profile).")
    timeout = forms.FloatField(required=False, min_value=1, max_value=600, help_text="Seconds per attempt.")
    is_default = forms.BooleanField(required=False, label="Use for background memory work")

    @classmethod
    def for_connection(cls, connection: Connection) -> "ConnectionForm":
        return cls(
            initial={
                f: getattr(connection, f)
                for f in ("name", "api", "base_url", "model", "profile", "context_window", "timeout", "is_default")
            }
        )

    def service_data(self) -> tuple[dict, str | None]:
        data = dict(self.cleaned_data)
        api_key = data.pop("api_key") or None
        if data.pop("clear_api_key"):
            api_key = ""
        return data, api_key
