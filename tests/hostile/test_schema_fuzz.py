"""Every API operation fuzzed from the OpenAPI schema (schemathesis, through WSGI, signed in with a token): no
answer is a server error, and every answer the schema documents has the documented shape.

Every operation is a slow test (`make test-all`, LOREKEEPER_FUZZ_EXAMPLES inputs per operation, default 4); `make
test` fuzzes a smoke subset, one write of each kind of resource, so a schema or shape that breaks them all shows at
once."""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

EXAMPLES = int(os.environ.get("LOREKEEPER_FUZZ_EXAMPLES", "4"))


def _schema():
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


schema = schemathesis.openapi.from_dict(_schema())
schema.app = get_wsgi_application()


pytestmark = pytest.mark.usefixtures("in_process_requests")
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
# The smoke subset: a write to each kind of resource (characters, chats, memories, settings, sync, extraction).
SMOKE = schema.include(
    path_regex=r"^/api/v1/(characters/|chats/|memories/search|settings|sync/pull|extraction/settings)$",
    method=["POST", "PATCH", "PUT"],
)


def _answers_without_a_server_error_in_its_schema(case, token) -> None:
    response = case.call(headers={"Authorization": f"Bearer {token}"})
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])


@pytest.mark.django_db
@SMOKE.parametrize()
@FUZZ
def test_a_write_of_each_resource_answers_no_server_error_and_keeps_its_schema(case, token):
    _answers_without_a_server_error_in_its_schema(case, token)


@pytest.mark.slow
@pytest.mark.django_db
@schema.parametrize()
@FUZZ
def test_no_operation_answers_a_server_error_or_breaks_its_schema(case, token):
    _answers_without_a_server_error_in_its_schema(case, token)
