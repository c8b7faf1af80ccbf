from django import forms

from apps.common.exceptions import ApplicationError
from apps.common.forms import TextareaField
from apps.llm.models import Connection
from apps.llm.sampler import CONTEXT_WINDOW_MAX, REPLY_TOKENS_MAX, sampler_clean

SAMPLER_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "stop",
)


def _number(label: str, help_text: str, *, integer: bool = False) -> forms.Field:
    field = forms.IntegerField if integer else forms.FloatField
    return field(required=False, label=label, help_text=help_text, widget=forms.NumberInput(attrs={"step": "any"}))


def stop_lines(text: str) -> list[str]:
    """Stop strings typed one per line; `\\n` inside one stands for a line break ("\\nAda:")."""
    return [line.replace("\\n", "\n") for line in text.replace("\r", "").split("\n") if line]


def stop_text(stop: list[str]) -> str:
    return "\n".join(item.replace("\n", "\\n") for item in stop)


class SamplerForm(forms.Form):
    """The samplers as typed; `sampler_clean` checks them (its error lands on the field it names)."""

    temperature = _number("Temperature", "0–2; lower is steadier, higher more varied.")
    top_p = _number("Top P", "0–1")
    top_k = _number("Top K", "0 or more; 0 is off.", integer=True)
    min_p = _number("Min P", "0–1")
    repetition_penalty = _number("Repetition penalty", "0–3; 1 is off.")
    frequency_penalty = _number("Frequency penalty", "−2 to 2")
    presence_penalty = _number("Presence penalty", "−2 to 2")
    seed = _number("Seed", "The same seed and prompt give the same reply.", integer=True)
    stop = TextareaField(
        required=False,
        strip=False,
        label="Stop strings",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line, up to 16; write \\n for a line break (\\nAda: stops before Ada speaks).",
    )

    def clean(self):
        cleaned = super().clean()
        values = {key: cleaned.get(key) for key in SAMPLER_FIELDS if key != "stop"}
        values["stop"] = stop_lines(cleaned.get("stop") or "")
        try:
            self.sampler = sampler_clean(values)
        except ApplicationError as exc:
            field = exc.extra.get("field")
            self.add_error(field if field in self.fields else None, exc.message)
        return cleaned

    @staticmethod
    def initial_for(sampler: dict) -> dict:
        return {key: value for key, value in sampler.items() if key != "stop"} | {
            "stop": stop_text(sampler.get("stop", []))
        }


class ConnectionForm(SamplerForm):
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
    context_window = forms.IntegerField(
        required=False,
        min_value=512,
        max_value=CONTEXT_WINDOW_MAX,
        label="Context size",
        help_text="Tokens the model takes in; empty: by profile (8,192 local, 128,000 hosted).",
    )
    timeout = forms.FloatField(required=False, min_value=1, max_value=600, help_text="Seconds per attempt.")
    reply_tokens = forms.IntegerField(
        required=False, min_value=1, max_value=REPLY_TOKENS_MAX, label="Reply length", help_text="Tokens."
    )
    is_default = forms.BooleanField(
        required=False,
        label="Use for background memory work",
        help_text="Extraction and summaries call this model on their own; a chat's history waits for your Run.",
    )
    price_prompt = forms.DecimalField(
        required=False, min_value=0, max_value=100_000, decimal_places=4, label="Price per million prompt tokens",
        help_text="Optional: the estimates before background work then show what it costs.",
    )  # fmt: skip
    price_reply = forms.DecimalField(
        required=False, min_value=0, max_value=100_000, decimal_places=4, label="Price per million reply tokens"
    )

    @classmethod
    def for_connection(cls, connection: Connection) -> "ConnectionForm":
        fields = ("name", "api", "base_url", "model", "profile", "context_window", "timeout", "reply_tokens")
        fields += ("price_prompt", "price_reply")
        initial = {f: getattr(connection, f) for f in (*fields, "is_default")}
        return cls(initial=initial | cls.initial_for(connection.sampler or {}))

    def service_data(self) -> tuple[dict, str | None]:
        data = {key: value for key, value in self.cleaned_data.items() if key not in SAMPLER_FIELDS}
        data["sampler"] = self.sampler
        if data.get("reply_tokens") is None:
            data.pop("reply_tokens", None)  # the stored length (a new connection: the default)
        api_key = data.pop("api_key") or None
        if data.pop("clear_api_key"):
            api_key = ""
        return data, api_key
