"""A store file that cannot be written answers the API with a clear status, never a 500:
a full disk 507 ``disk_full`` (nothing changed, the store goes on), any other I/O error
503 ``store_io_error`` (the store then refuses writes until it is reopened)."""

from __future__ import annotations

import errno

import pytest

from tests.api.apitools import error_of
from tests.faults.faultyfs import FaultyFS


@pytest.mark.parametrize(
    ("code", "status", "error_code"),
    [(errno.ENOSPC, 507, "disk_full"), (errno.EIO, 503, "store_io_error")],
)
def test_a_topic_whose_metadata_cannot_be_saved_answers_a_clear_error(
    as_admin, store, code, status, error_code
):
    with FaultyFS(store.path) as fs:
        fs.fail(("write_atomic", "pwrite_all"), code, path_part="topics.json")
        response = as_admin.post(
            "/api/v1/topics/", {"name": "payments", "queues": 3}, format="json"
        )
    assert response.status_code == status
    assert error_of(response)["code"] == error_code
    assert "payments" not in [t.name for t in store.topics()]
