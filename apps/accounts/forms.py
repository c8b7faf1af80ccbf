from django import forms
from django.contrib.auth.forms import UserCreationForm


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=False, help_text="Optional; needed only to reset a forgotten password.")

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'SillyTavern on my laptop'.")
