"""What drf-spectacular leaves out of the OpenAPI schema: the bounds of nested serializers with `many=True`.

A `ListField(max_length=…)` shows as `maxItems`, but `Serializer(many=True, max_length=…)` (a ListSerializer, which
checks its bounds in code rather than through validators) shows as an unbounded array. Registered by
apps/common/apps.py."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiSerializerFieldExtension


class BoundedListSerializerExtension(OpenApiSerializerFieldExtension):
    target_class = "rest_framework.serializers.ListSerializer"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if isinstance(schema, dict) and schema.get("type") == "array":
            if self.target.max_length is not None:
                schema["maxItems"] = self.target.max_length
            if self.target.min_length is not None:
                schema["minItems"] = self.target.min_length
        return schema
