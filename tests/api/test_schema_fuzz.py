"""A property-based fuzz of the whole API from its OpenAPI schema (schemathesis).

Every operation gets generated requests, valid and invalid, sent as an admin (the role
that reaches every code path) to the app in-process; no answer may be a 5xx, and every
answer must match the schema: its status code, content type, headers and body; requests
that break the schema must be refused.

Not checked: that every schema-valid request is accepted. Some rules span fields (one
search mode at a time; ``offset`` or ``group``) and OpenAPI 3.0 cannot say them, so such
requests get a 400 that is right.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from console.accounts.models import ApiToken

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

#: Long polls are capped at this many seconds in the fuzz, to keep it quick.
FUZZ_WAIT_S = 0.01


@pytest.fixture
def populated(store):
    store.create_topic("orders", 2)
    store.append_batch(
        "orders", [{"body": f"m{i}", "key": f"k{i % 3}", "queue": i % 2} for i in range(10)]
    )
    store.commit_offset("billing", "orders", 0, 2)
    return store


@pytest.fixture
def admin_token(django_user_model) -> str:
    user = django_user_model.objects.create_superuser("fuzz", "fuzz@example.com", None)
    return ApiToken.issue(user, "fuzz")[1]


# The schema is the one /api/schema/ serves (that needs a login), made in-process: it needs
# no database or store. Requests go to the app itself.
schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
schema.app = get_wsgi_application()
schema.location = "/api/schema/?format=json"


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_request_breaks_the_api(case, populated, admin_token):
    if case.query and "wait" in case.query:
        case.query["wait"] = FUZZ_WAIT_S
    case.call_and_validate(
        headers={"Authorization": f"Token {admin_token}"},
        excluded_checks=[positive_data_acceptance],
    )
