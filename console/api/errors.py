"""One error shape for the whole API.

Every error answers ``{"error": {"code": "...", "message": "...", "details": {...}}}``:
DRF's own exceptions (validation, authentication, permission, throttling, parsing) and
the engine's refusals (``StoreError`` subclasses) are mapped to the fitting status.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from console.groups.resets import (
    PreviewExpiredError,
    PreviewNotFoundError,
    ResetNotFoundError,
    WrongPreviewError,
)
from console.operations.groups import GroupNotFoundError
from storeadapter.engine import (
    DiskFullError,
    InvalidMessageError,
    InvalidMessageIdError,
    InvalidNameError,
    MessageNotFoundError,
    MessageTooLargeError,
    OffsetConflictError,
    OffsetOutOfRangeError,
    QueueFrozenError,
    QueueInUseError,
    QueueNotFoundError,
    StoreClosedError,
    StoreError,
    StoreFailedError,
    StoreIOError,
    StreamTopicError,
    TopicExistsError,
    TopicNotFoundError,
)
from storeadapter.offset_reset import ResetConflictError, ResetError, ResetOutdatedError


class ApiError(exceptions.APIException):
    """An error a view raises with its own code, status and details."""

    def __init__(self, status_code: int, code: str, message: str, details: dict | None = None):
        super().__init__(message, code)
        self.status_code = status_code
        self.error_code = code
        self.details = details or {}


class PayloadTooLarge(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "payload_too_large", message)


#: Engine refusal → (status, code). The first matching class wins: subclasses first.
STORE_ERRORS: tuple[tuple[type[StoreError], int, str], ...] = (
    (GroupNotFoundError, 404, "group_not_found"),
    (TopicNotFoundError, 404, "topic_not_found"),
    (QueueNotFoundError, 404, "queue_not_found"),
    (MessageNotFoundError, 404, "message_not_found"),
    (TopicExistsError, 409, "topic_exists"),
    (QueueInUseError, 409, "queue_in_use"),
    (QueueFrozenError, 409, "queue_frozen"),
    (OffsetConflictError, 409, "offset_conflict"),
    (StreamTopicError, 409, "wrong_topic_kind"),
    (ResetConflictError, 409, "offsets_moved"),
    (ResetOutdatedError, 409, "preview_outdated"),
    (PreviewNotFoundError, 404, "preview_not_found"),
    (ResetNotFoundError, 404, "reset_not_found"),
    (PreviewExpiredError, 400, "preview_expired"),
    (WrongPreviewError, 400, "wrong_preview"),
    (MessageTooLargeError, 413, "message_too_large"),
    (InvalidNameError, 400, "invalid_name"),
    (InvalidMessageIdError, 400, "invalid_message_id"),
    (InvalidMessageError, 400, "invalid_message"),
    (OffsetOutOfRangeError, 400, "offset_out_of_range"),
    (ResetError, 400, "invalid_reset"),
    (DiskFullError, 507, "disk_full"),
    (StoreFailedError, 503, "store_failed"),
    (StoreIOError, 503, "store_io_error"),
    (StoreClosedError, 503, "store_closed"),
    (StoreError, 400, "refused"),
)

_DRF_CODES = {
    exceptions.ParseError: "malformed_request",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
    exceptions.ValidationError: "invalid",
}


def error_body(code: str, message: str, details: dict | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def _message_of(detail: Any) -> str:
    """A sentence from DRF's error detail (a string, list or dict of them)."""
    if isinstance(detail, dict):
        for field, value in detail.items():
            text = _message_of(value)
            return text if field in ("non_field_errors", "detail") else f"{field}: {text}"
        return "The request is not valid."
    if isinstance(detail, list):
        return _message_of(detail[0]) if detail else "The request is not valid."
    return str(detail)


def _details_of(detail: Any) -> dict:
    if isinstance(detail, dict):
        return {"fields": exceptions._get_full_details(detail)}
    if isinstance(detail, list):
        return {"fields": {"non_field_errors": exceptions._get_full_details(detail)}}
    return {}


def exception_handler(error: Exception, context: dict) -> Response | None:
    """DRF's EXCEPTION_HANDLER: every known error in the one shape."""
    if isinstance(error, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        error = PayloadTooLarge(f"The body is larger than {limit} bytes.")
    if isinstance(error, Http404):
        error = exceptions.NotFound(str(error) or "Not found.")
    elif isinstance(error, DjangoPermissionDenied):
        error = exceptions.PermissionDenied(str(error) or None)
    if isinstance(error, StoreError):
        for kind, code_status, code in STORE_ERRORS:
            if isinstance(error, kind):
                set_rollback()
                return Response(error_body(code, str(error)), status=code_status)
    if isinstance(error, ApiError):
        set_rollback()
        return Response(
            error_body(error.error_code, str(error.detail), error.details),
            status=error.status_code,
        )
    if not isinstance(error, exceptions.APIException):
        return None
    headers = {}
    if getattr(error, "auth_header", None):
        headers["WWW-Authenticate"] = error.auth_header
    if getattr(error, "wait", None):
        headers["Retry-After"] = str(int(error.wait))
    code = next((c for kind, c in _DRF_CODES.items() if isinstance(error, kind)), "error")
    details = _details_of(error.detail) if isinstance(error, exceptions.ValidationError) else {}
    if isinstance(error, exceptions.Throttled) and error.wait:
        details = {"retry_after_s": int(error.wait)}
    set_rollback()
    return Response(
        error_body(code, _message_of(error.detail), details),
        status=error.status_code,
        headers=headers,
    )


@csrf_exempt
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Unknown paths under /api/: a JSON 404, not the console's HTML page."""
    return JsonResponse(
        error_body("not_found", f"There is no API endpoint at {request.path}."), status=404
    )
