from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from apps.common.jsonsafe import loads_strict, unstorable_reason
from apps.common.moments import RANGE_TEXT, moment_kept


class StorableInputSerializer(serializers.Serializer):
    """Rejects, with the field's name, values PostgreSQL cannot store (NUL characters, lone surrogates)."""

    def validate(self, attrs):
        errors = {}
        for key, value in attrs.items():
            reason = unstorable_reason(value)
            if reason:
                errors[key] = [f"This value {reason}."]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


INT_MAX = 2**31 - 1  # what a PostgreSQL integer column holds
BIGINT_MAX = 2**63 - 1  # and a bigint one


class MomentField(serializers.DateTimeField):
    """A date and time Lorekeeper keeps (apps/common/moments.py): one outside the years 2 to 9998 is refused."""

    default_error_messages = {"not_kept": f"Expected a moment {RANGE_TEXT}."}

    def to_internal_value(self, value):
        moment = super().to_internal_value(value)
        if not moment_kept(moment):
            self.fail("not_kept")
        return moment


class JSONField(serializers.JSONField):
    """Any JSON value. A form or multipart field's text is read as the JSON parser reads a body (DRF's own field
    reads it with json.loads, which takes NaN and 1e400, which jsonb refuses, and follows nesting past the stack)."""

    def to_internal_value(self, data):
        if self.binary or getattr(data, "is_json_string", False):
            try:
                return loads_strict(data.decode() if isinstance(data, bytes) else data)
            except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
                self.fail("invalid")
        return super().to_internal_value(data)


class DictField(JSONField):
    """A JSON object."""

    default_error_messages = {"not_object": "Expected a JSON object."}

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_object")
        return value


def paginated(child: type[serializers.Serializer]) -> serializers.Serializer:
    """The schema of a cursor-paginated list of `child` (what ListPagination answers)."""
    from drf_spectacular.utils import inline_serializer

    name = getattr(getattr(child, "Meta", None), "ref_name", None) or child.__name__.removesuffix("Serializer")
    return inline_serializer(
        name=f"Paginated{name}",
        fields={
            "next": serializers.URLField(allow_null=True, help_text="The next page (same query), or null."),
            "previous": serializers.URLField(allow_null=True, help_text="The previous page, or null."),
            "results": child(many=True),
        },
    )


def patch_checked(
    serializer_class: type[serializers.Serializer], data, *, answered: Mapping[str, Any] | None = None
) -> serializers.Serializer:
    """A PATCH's (or partial PUT's) body checked by `serializer_class`, its fields' names included: one it does
    not take is refused by name, as a misspelt "importanse" was answered 200 with nothing changed. `answered`: the
    object as its answer shows it now; a field only answered (an `id`, a `version`) may be sent back as it is, with
    the rest of what a client read, but not changed."""
    serializer = serializer_class(data=data, partial=True)
    if isinstance(data, dict):
        shown = answered or {}
        unknown = sorted(
            str(name) for name, value in data.items()
            if name not in serializer.fields and (name not in shown or shown[name] != value)
        )  # fmt: skip
        if unknown:
            taken = ", ".join(name for name, field in serializer.fields.items() if not field.read_only)
            raise serializers.ValidationError(
                {name: [f"Not a field this changes (it changes {taken})."] for name in unknown[:20]}
            )
    serializer.is_valid(raise_exception=True)
    return serializer
