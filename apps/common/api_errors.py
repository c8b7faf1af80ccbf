"""One place that turns domain errors into HTTP answers. The validation boundary: a serializer checks a request's
shape, a service raises ApplicationError for a domain rule, the database holds the invariants."""

from __future__ import annotations

from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler

from apps.common.exceptions import ApplicationError


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response(exc.body(), status=exc.status)
    if isinstance(exc, DjangoValidationError):
        exc = drf_exceptions.ValidationError(as_serializer_error(exc))
    if isinstance(exc, Http404 | ObjectDoesNotExist):
        exc = drf_exceptions.NotFound()
    if isinstance(exc, PermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    return exception_handler(exc, context)
