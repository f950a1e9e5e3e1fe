"""A client of the session tool-configuration engine's HTTP API, written
with the Python standard library only (Python 3.10 or later).

    from tool_engine import Client, commands

    engine = Client("http://127.0.0.1:7420", channel="web")
    wrote = engine.append("s1", [commands.enable(), commands.disable_tool("bash")])
    view = engine.turn_begin("s1", provider="anthropic")
    tools = view.rendering          # the provider tools array, as it is
    engine.turn_end("s1")

One method per operation of the API (docs/api.md), named as the operation
with "_" for "-"; typed requests (requests.py) and replies (replies.py);
one exception class per error code (errors.py). See clients/python/README.md.
"""

__version__ = "1.0.0"

from . import commands, idempotency
from .client import DEFAULT_URL, NO_RETRY, Client, RetryPolicy
from .errors import (ERRORS, BusyError, ConflictError, DeletedError, EngineError, ForbiddenError,
                     IdempotencyKeyInUseError, IdempotencyKeyMismatchError, InternalError, InvalidError,
                     MethodNotAllowedError, NotFoundError, NoTurnError, OutcomeUnknownError, StorageFullError,
                     TooLargeError, TransportError, UnauthorizedError, UnavailableError, UnsupportedMediaTypeError)
from .live import LiveStream
from .ops import LIVE_OPERATIONS, OPERATIONS, Operation
from .replies import *  # noqa: F401,F403 (the reply dataclasses)
from .requests import *  # noqa: F401,F403 (the request dataclasses, Intent, Override)
