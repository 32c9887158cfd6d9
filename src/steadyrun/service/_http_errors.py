"""How the HTTP API answers errors: status codes, stable codes, and messages in HTTP terms.

Errors raised below the API speak to Python callers ("pass Runtime(store, agents=[...])",
"start it with Runtime.run()"); an HTTP client can do neither, so ``http_message`` rewords
those for the API. A body that is not JSON at all is a 400 (the request is malformed); JSON
that does not fit the route's model is a 422 (it is well-formed but invalid).
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from steadyrun._errors import (
    ConflictError,
    EngineUnavailableError,
    ForeignEngineError,
    InvalidResponseError,
    NotPendingError,
    RunBusyError,
    RunCancelledError,
    RunNotFoundError,
    StepNotFoundError,
    StoreError,
    UnknownCallError,
    UsageError,
)
from steadyrun.service._app import NotSupportedError
from steadyrun.service._schemas import ErrorOut

__all__ = [
    "ERROR_STATUS",
    "complete_openapi",
    "error_responses",
    "http_message",
    "install_error_handlers",
]

log = logging.getLogger("steadyrun.service")

ERROR_STATUS: list[tuple[type[Exception], int, str]] = [
    (RunNotFoundError, 404, "not_found"),
    (StepNotFoundError, 404, "not_found"),
    (UnknownCallError, 404, "not_found"),
    (NotPendingError, 409, "not_pending"),
    (ConflictError, 409, "conflict"),
    (RunCancelledError, 409, "cancelled"),
    (ForeignEngineError, 409, "other_engine"),
    (RunBusyError, 409, "busy"),
    (InvalidResponseError, 422, "invalid"),
    (UsageError, 422, "invalid"),
    (NotSupportedError, 501, "not_supported"),
]
"""Exception class, status and error code; the first class an error is an instance of wins."""

_DESCRIPTIONS = {
    400: "The body is not JSON (or is missing).",
    401: "No valid bearer token.",
    404: "No such run, step, call or wait.",
    409: "The action cannot apply now: not pending, already done differently, busy, cancelled.",
    413: "The request body is too large.",
    422: "The request is well-formed but invalid (see details).",
    501: "Not available in this release.",
    503: "The store failed; try again (error_id is in the logs).",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for a route's error statuses, each with the ``ErrorOut`` body."""
    return {s: {"model": ErrorOut, "description": _DESCRIPTIONS[s]} for s in statuses}


def complete_openapi(
    api: FastAPI, public: set[str], schemas: dict[str, dict[str, Any]] | None = None
) -> None:
    """Make the OpenAPI document list the errors every route may answer.

    Routes declare their own errors; the ones the gate and the store add to every route (401,
    413 where a body is read, 503), and the 404 of a route on a run, are added here where a
    route (the stream's, say) did not declare them. ``schemas`` are added to the document's
    components (bodies that are not pydantic models, such as the display snapshot).
    """
    plain = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is not None:
            return api.openapi_schema
        doc = plain()
        ref = {"$ref": "#/components/schemas/ErrorOut"}
        for path, operations in doc.get("paths", {}).items():
            for method, operation in operations.items():
                wanted = [] if path in public else [401, 503]
                if "{run_id}" in path:
                    wanted.append(404)
                if method in ("post", "put", "patch"):
                    wanted.append(413)
                responses = operation.setdefault("responses", {})
                if "HTTPValidationError" in str(responses.get("422", "")):
                    # FastAPI's own 422 body; this API answers every error as ErrorOut.
                    del responses["422"]
                if operation.get("parameters") or "requestBody" in operation:
                    wanted.append(422)
                for status in wanted:
                    responses.setdefault(
                        str(status),
                        {
                            "description": _DESCRIPTIONS[status],
                            "content": {"application/json": {"schema": ref}},
                        },
                    )
        components = doc.setdefault("components", {}).setdefault("schemas", {})
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        for name, schema in (schemas or {}).items():
            if components.setdefault(name, schema) != schema:
                raise AssertionError(f"two schemas are named {name!r} in the OpenAPI document")
        api.openapi_schema = doc
        return doc

    api.openapi = openapi  # type: ignore[method-assign]


# Hints at Python calls, and the HTTP words that replace them.
_AGENT_HINT = re.compile(
    r"(?::|,)? ?\(?pass (?:agent=\.\.\. or )?Runtime\(store, agents=\[\.\.\.\]\)\)?"
)


def http_message(exc: Exception) -> str:
    """The error's message as an HTTP client should read it."""
    if isinstance(exc, RunNotFoundError):
        return f"no run with id {exc.run_id!r}; start one with POST /runs"
    if isinstance(exc, ForeignEngineError):
        return (
            f"run {exc.run_id!r} is executed by {exc.engine}; this service does not write to "
            "it (use that engine's client)"
        )
    if isinstance(exc, RunBusyError):
        return (
            f"run {exc.run_id!r} is executing in {exc.owner!r}; give it input with "
            f"POST /runs/{exc.run_id}/messages, or try again once it stopped"
        )
    message = str(exc)
    if _AGENT_HINT.search(message):
        message = _AGENT_HINT.sub("", message).rstrip(" :,")
        message = message.replace("this runtime does not know", "this service has not registered")
        if "registered" not in message:
            message += " (that agent is not registered with this service)"
    return message


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    body = {"error": code, "message": message, **{k: v for k, v in extra.items() if v}}
    return JSONResponse(status_code=status, content=body)


def _malformed(errors: list[dict[str, Any]], request: Request) -> str | None:
    """What is wrong when the body is not JSON at all (a 400), or ``None``."""
    for e in errors:
        loc = tuple(e.get("loc", ()))
        if not loc or loc[0] != "body":
            continue
        if e.get("type") == "json_invalid":
            why = (e.get("ctx") or {}).get("error", "it does not parse")
            where = f" at character {loc[1]}" if len(loc) > 1 else ""
            return f"the body is not valid JSON: {why}{where}"
        if loc == ("body",) and e.get("type") == "missing":
            return "this request needs a JSON body"
        if loc == ("body",) and isinstance(e.get("input"), bytes | str):
            sent = request.headers.get("content-type") or "none"
            return (
                "the body must be JSON sent with Content-Type: application/json "
                f"(the Content-Type was {sent})"
            )
    return None


def install_error_handlers(api: FastAPI) -> None:
    """Answer every error as ``ErrorOut`` JSON with its status (no stack trace leaves)."""
    for cls, status, code in ERROR_STATUS:

        def handler(
            request: Request, exc: Exception, status: int = status, code: str = code
        ) -> JSONResponse:
            return _error(status, code, http_message(exc))

        api.add_exception_handler(cls, handler)

    def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = list(exc.errors())
        malformed = _malformed(errors, request)
        if malformed is not None:
            return _error(400, "bad_request", malformed)
        details = [
            {
                "where": ".".join(str(p) for p in e.get("loc", ())),
                # A model's own check says its words; pydantic prefixes them.
                "problem": str(e.get("msg", "")).removeprefix("Value error, "),
            }
            for e in errors
        ]
        first = details[0] if details else {"where": "request", "problem": "invalid"}
        message = f"{first['where']}: {first['problem']}"
        return _error(422, "invalid", message, details=details)

    def http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(exc.status_code, code, str(exc.detail))

    def store_failed(request: Request, exc: Exception) -> JSONResponse:
        error_id = uuid.uuid4().hex[:12]
        log.error(
            "store error %s on %s %s", error_id, request.method, request.url.path, exc_info=exc
        )
        return _error(503, "store_unavailable", "the store failed; try again", error_id=error_id)

    def engine_failed(request: Request, exc: Exception) -> JSONResponse:
        # The engine's cluster (Temporal) did not answer: the caller's request is worth
        # repeating as it is, and the engine's own words say why.
        log.warning("engine unavailable on %s %s: %s", request.method, request.url.path, exc)
        return _error(503, "engine_unavailable", str(exc))

    def crashed(request: Request, exc: Exception) -> JSONResponse:
        error_id = uuid.uuid4().hex[:12]
        log.error(
            "internal error %s on %s %s", error_id, request.method, request.url.path, exc_info=exc
        )
        return _error(500, "internal", "internal server error", error_id=error_id)

    api.add_exception_handler(RequestValidationError, invalid)
    api.add_exception_handler(StarletteHTTPException, http)
    api.add_exception_handler(StoreError, store_failed)
    api.add_exception_handler(EngineUnavailableError, engine_failed)
    api.add_exception_handler(Exception, crashed)
