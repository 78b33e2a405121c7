"""/api/schema/ and /api/docs/: the OpenAPI document, and Swagger UI served locally; both
need a viewer's login (a session, or a token for the schema)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def reader(viewer):
    """A viewer's browser session (the docs page is a page: it knows sessions, not tokens)."""
    from django.test import Client

    client = Client()
    client.force_login(viewer)
    return client


def test_the_schema_and_docs_need_a_login(client):
    assert client.get("/api/schema/?format=json").status_code == 401
    docs = client.get("/api/docs/")
    assert docs.status_code == 302
    assert docs["Location"].startswith("/accounts/login/?next=/api/docs/")


def test_the_schema_takes_a_token_too(as_viewer):
    assert as_viewer.get("/api/schema/?format=json").status_code == 200


def test_the_docs_page_starts_swagger_ui_from_a_script_file(reader):
    page = reader.get("/api/docs/").content.decode()
    script = re.search(r'<script src="([^"]*\?script[^"]*)"', page)

    assert script, page
    answer = reader.get(script.group(1).replace("&amp;", "&"))
    assert answer.status_code == 200
    assert b"SwaggerUIBundle" in answer.content


def test_the_schema_is_openapi_3_with_every_resource(reader):
    schema = reader.get("/api/schema/?format=json").json()

    assert schema["openapi"].startswith("3.")
    for path in (
        "/api/v1/topics/",
        "/api/v1/topics/{topic}/queues/{queue}/freeze/",
        "/api/v1/storage/",
        "/api/v1/audit/",
    ):
        assert path in schema["paths"], path


def test_every_operation_documents_the_error_shape(reader):
    schema = reader.get("/api/schema/?format=json").json()

    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            errors = [s for s in operation["responses"] if s >= "400"]
            assert {"401", "403", "429"} <= set(errors), (method, path)
            for status in errors:
                content = operation["responses"][status]["content"]["application/json"]
                assert content["schema"] in (
                    {"$ref": "#/components/schemas/ApiError"},
                    {"$ref": "#/components/schemas/Error"},
                ), (method, path, status)


def test_each_operation_lists_the_errors_it_can_give_and_no_others(reader):
    paths = reader.get("/api/schema/?format=json").json()["paths"]

    def errors(path, method):
        return sorted(s for s in paths[path][method]["responses"] if s >= "400")

    # A paged list: page and page_size that are not whole numbers from 1 are a 400, a page
    # past the last a 404.
    assert errors("/api/v1/tasks/", "get") == ["400", "401", "403", "404", "429"]
    assert errors("/api/v1/storage/", "get") == ["401", "403", "429", "503"]
    assert errors("/api/v1/groups/{group}/resets/", "get") == [
        "400",
        "401",
        "403",
        "404",
        "429",
        "503",
    ]
    assert errors("/api/v1/groups/{group}/resets/{reset}/undo/", "post") == [
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "415",
        "429",
        "503",
    ]
    assert errors("/api/v1/topics/{topic}/messages/", "post") == [
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "415",
        "429",
        "503",
        "507",
    ]


def test_the_schema_declares_token_auth(reader):
    schema = reader.get("/api/schema/?format=json").json()

    schemes = schema["components"]["securitySchemes"]
    assert any(s.get("scheme") == "bearer" or s.get("in") == "header" for s in schemes.values())


def test_the_docs_page_loads_its_assets_from_this_server(reader):
    page = reader.get("/api/docs/").content.decode()

    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources, page
    assert all(not s.startswith(("http://", "https://", "//")) for s in sources), sources
    assert any("swagger-ui" in s for s in sources)


def test_the_schema_validates_without_warnings(tmp_path):
    from django.core.management import call_command

    # --fail-on-warn turns any drf-spectacular warning (such as an operationId collision)
    # and any OpenAPI validation error into a failure.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", tmp_path / "api.yml")

    assert (tmp_path / "api.yml").stat().st_size > 0
