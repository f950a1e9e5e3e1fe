"""Exceptions: one class per error code of the API (docs/api.md, "Error
codes"), all subclasses of EngineError, plus TransportError for requests
that got no reply at all.

Catch the class, never match the message: ``except ConflictError as e:``
then ``e.expected`` and ``e.actual``. ``e.retry_after`` is the reply's
Retry-After in seconds (busy and unavailable replies carry one).
"""

from __future__ import annotations

import json
from typing import Optional


class EngineError(Exception):
    """An error reply of the engine: ``status`` is the HTTP status, ``code``
    the stable error code, ``message`` for people. ``expected`` and
    ``actual`` are a conflict's sequences; ``retry_after`` the seconds the
    reply asked to wait (None when it said nothing); ``operation`` the
    operation that failed."""

    code = ""
    status_default = 0

    def __init__(self, message: str, *, status: int = 0, code: Optional[str] = None,
                 expected: Optional[int] = None, actual: Optional[int] = None,
                 retry_after: Optional[float] = None, operation: str = ""):
        super().__init__(message)
        self.message = message
        self.status = status or self.status_default
        if code is not None:
            self.code = code
        self.expected = expected
        self.actual = actual
        self.retry_after = retry_after
        self.operation = operation

    def __str__(self) -> str:
        where = f"{self.operation}: " if self.operation else ""
        text = f"{where}{self.status} {self.code}: {self.message}"
        if self.code == "conflict":
            text += f" (expected {self.expected}, actual {self.actual})"
        return text


class ConflictError(EngineError):
    """409: the session moved past the expected sequence (see expected and actual)."""

    code = "conflict"
    status_default = 409


class InvalidError(EngineError):
    """400: the request is wrong; the message names the bad value."""

    code = "invalid"
    status_default = 400


class NoTurnError(EngineError):
    """409: turn-discover, turn-checkpoint or turn-end on a session with no open turn."""

    code = "no_turn"
    status_default = 409


class NotFoundError(EngineError):
    """404: no such route, or nothing recorded to show."""

    code = "not_found"
    status_default = 404


class MethodNotAllowedError(EngineError):
    """405: the route exists for other methods."""

    code = "method_not_allowed"
    status_default = 405


class TooLargeError(EngineError):
    """413: the request body exceeds the engine's bound."""

    code = "too_large"
    status_default = 413


class UnavailableError(EngineError):
    """503: the engine cannot serve the request now; retry later (the client does)."""

    code = "unavailable"
    status_default = 503


class OutcomeUnknownError(EngineError):
    """503, or no reply to a write: it may or may not be stored. Read the session (or retry an
    append with the same idempotency key) before writing again."""

    code = "outcome_unknown"
    status_default = 503


class StorageFullError(EngineError):
    """507: the engine's store is short of free space; nothing was written."""

    code = "storage_full"
    status_default = 507


class InternalError(EngineError):
    """500: a bug or an unexpected failure."""

    code = "internal"
    status_default = 500


class BusyError(EngineError):
    """429: too many requests in flight; retry after retry_after (the client does)."""

    code = "busy"
    status_default = 429


class UnauthorizedError(EngineError):
    """401: no valid bearer token."""

    code = "unauthorized"
    status_default = 401


class ForbiddenError(EngineError):
    """403: the caller may not do this."""

    code = "forbidden"
    status_default = 403


class IdempotencyKeyInUseError(EngineError):
    """422: the idempotency key was used on another session or by another channel; nothing was
    written. Generate a new key."""

    code = "idempotency_key_in_use"
    status_default = 422


class UnsupportedMediaTypeError(EngineError):
    """415: a body neither JSON nor msgpack."""

    code = "unsupported_media_type"
    status_default = 415


class IdempotencyKeyMismatchError(EngineError):
    """422: the idempotency key was used on this session with other commands; nothing was
    written."""

    code = "idempotency_key_mismatch"
    status_default = 422


class DeletedError(EngineError):
    """410: the session was deleted; it answers no read and takes no write."""

    code = "deleted"
    status_default = 410


ERRORS: dict[str, type] = {cls.code: cls for cls in (
    ConflictError, InvalidError, NoTurnError, NotFoundError, MethodNotAllowedError, TooLargeError,
    UnavailableError, OutcomeUnknownError, StorageFullError, InternalError, BusyError,
    UnauthorizedError, ForbiddenError, IdempotencyKeyInUseError, UnsupportedMediaTypeError,
    IdempotencyKeyMismatchError, DeletedError)}
"""The exception class of each error code, in the API's order."""

# The code of an error reply whose body is not the engine's envelope (a
# proxy in between), by HTTP status: the engine's own rule (wire.CodeForStatus).
_STATUS_CODES = {400: "invalid", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 405: "method_not_allowed", 410: "deleted", 409: "conflict", 413: "too_large",
                 415: "unsupported_media_type", 422: "idempotency_key_in_use", 429: "busy",
                 500: "internal", 502: "unavailable", 503: "unavailable", 504: "unavailable",
                 507: "storage_full"}


def code_for_status(status: int) -> str:
    """The code assumed for a reply that is not an error envelope: 409 is
    conflict, 507 storage_full, other 4xx invalid, other 5xx internal."""
    if status in _STATUS_CODES:
        return _STATUS_CODES[status]
    return "invalid" if 400 <= status < 500 else "internal"


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After as seconds (RFC 9110 delay-seconds); None when absent or not a number."""
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        return None
    return float(n) if n >= 0 else None


def error_from_reply(status: int, body: bytes, retry_after: Optional[str], operation: str = "") -> EngineError:
    """The exception of an error reply: the envelope's code and message, or,
    for a body that is not the envelope, the status's code and the body's
    first 200 characters."""
    ra = parse_retry_after(retry_after)
    try:
        env = json.loads(body.decode("utf-8"))
        err = env.get("error") if isinstance(env, dict) else None
        if isinstance(err, dict) and err.get("code"):
            code = str(err["code"])
            cls = ERRORS.get(code, EngineError)
            return cls(str(err.get("message", "")), status=status, code=code, expected=err.get("expected"),
                       actual=err.get("actual"), retry_after=ra, operation=operation)
    except (ValueError, UnicodeDecodeError):
        pass
    text = body.decode("utf-8", "replace").strip()
    if len(text) > 200:
        text = text[:200] + "..."
    code = code_for_status(status)
    return ERRORS[code](text or f"HTTP {status}", status=status, code=code, retry_after=ra, operation=operation)


class TransportError(Exception):
    """No reply came: the engine could not be reached, or the connection
    failed or timed out before the reply. ``sent`` says whether the request
    may have reached the engine (a write may then be stored; the client
    raises OutcomeUnknownError for such writes instead)."""

    def __init__(self, message: str, *, sent: bool, operation: str = ""):
        super().__init__(message)
        self.sent = sent
        self.operation = operation
