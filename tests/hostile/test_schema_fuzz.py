"""Every API operation fuzzed from the OpenAPI schema (schemathesis, through WSGI, signed in with a token): no
answer is a server error, and every answer the schema documents has the documented shape.

`make test` tries LOREKEEPER_FUZZ_EXAMPLES (default 4) inputs per operation; `make test-all` many more."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from apps.accounts.services import api_token_create

EXAMPLES = int(os.environ.get("LOREKEEPER_FUZZ_EXAMPLES", "4"))


def _schema():
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


schema = schemathesis.openapi.from_dict(_schema())
schema.app = get_wsgi_application()


@pytest.fixture
def token(user):
    return api_token_create(user=user, name="fuzz")[1]


@pytest.fixture(autouse=True)
def keep_the_tests_connection():
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_operation_answers_a_server_error_or_breaks_its_schema(case, token):
    response = case.call(headers={"Authorization": f"Bearer {token}"})
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
