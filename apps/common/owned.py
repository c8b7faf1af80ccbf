"""The Django admin's forms for a person's own objects: what such an object links (a chat's characters and
persona, an entity's character) must be the same person's. A moderator picking by id or from a list of every
account's objects could otherwise mix two accounts (another person's "Mira" looks like this person's)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet


def _owner_id(value) -> int | None:
    return getattr(value, "user_id", None)


class SameOwnerForm(forms.ModelForm):
    """Refuses, naming the field, a linked object of another account than the object's own `user`; and offers in
    each list only the owner's objects once the owner is known (a change form)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        owner = getattr(self.instance, "user_id", None)
        for field in self.fields.values():
            queryset = getattr(field, "queryset", None)
            if owner and queryset is not None and _has_user(queryset.model):
                field.queryset = queryset.filter(user_id=owner)

    def clean(self):
        cleaned = super().clean()
        user = cleaned.get("user") if "user" in self.fields else None
        owner = user.pk if user is not None else getattr(self.instance, "user_id", None)
        if owner is None:
            return cleaned
        for name, value in cleaned.items():
            if name == "user" or value is None:
                continue
            linked = list(value) if isinstance(value, (list, tuple, QuerySet)) else [value]
            others = [item for item in linked if _owner_id(item) not in (None, owner)]
            if others:
                self.add_error(name, ValidationError(
                    f"{', '.join(f'{item} (#{item.pk})' for item in others)} belongs to another account: link only "
                    "this one's own."
                ))  # fmt: skip
        return cleaned


def _has_user(model) -> bool:
    return any(field.name == "user" and field.is_relation for field in model._meta.get_fields())
