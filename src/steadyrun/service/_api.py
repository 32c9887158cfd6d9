"""The HTTP API: runs, host operations, the live display stream (SSE) and the web page."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.exceptions import HTTPException as StarletteHTTPException

from steadyrun._codec import to_plain
from steadyrun._errors import (
    ConflictError,
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
from steadyrun.records import CallRecord, RunStatus
from steadyrun.runtime import Runtime
from steadyrun.service._app import App, NotSupportedError
from steadyrun.service._gate import RequestGate
from steadyrun.service._history import edit_message, fork_out, step_out
from steadyrun.service._schemas import (
    AgentList,
    AnswerRequest,
    CallOut,
    CancelOut,
    DecideRequest,
    ErrorOut,
    ForkOut,
    ForkRequest,
    HistoryOut,
    MessageOut,
    MessageRequest,
    PendingList,
    PendingOut,
    ResumeOut,
    RunList,
    RunOut,
    SettleRequest,
    StartOut,
    StartRequest,
)
from steadyrun.service._start import start_fingerprint
from steadyrun.stream import display_call, to_json

__all__ = ["TOKENS_ENV", "create_app"]

log = logging.getLogger("steadyrun.service")

TOKENS_ENV = "STEADYRUN_API_TOKENS"
"""Environment variable with the API's bearer tokens, comma-separated (when none are passed)."""

STATIC = Path(__file__).parent / "static"

# Events end in a blank line of "\n"s (sse-starlette's default is "\r\n"): the web page and
# the clients written against the stream split on "\n\n".
_SEP = "\n"

_ERRORS: list[tuple[type[Exception], int, str]] = [
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

_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "No valid bearer token."},
    404: {"model": ErrorOut, "description": "No such run, call or wait."},
    409: {"model": ErrorOut, "description": "Not pending, or a conflicting earlier write."},
    413: {"model": ErrorOut, "description": "The request body is too large."},
    422: {"model": ErrorOut, "description": "The request is invalid."},
}

_SNAPSHOT_DOC = (
    "The run's display snapshot as versioned JSON: "
    '`{"format": 1, "data": DisplaySnapshot}` (see docs/service.md).'
)


def create_app(
    app_or_runtime: App | Runtime,
    *,
    tokens: Sequence[str] | None = None,
    max_body_bytes: int = 1_000_000,
    stream_poll_seconds: float = 1.0,
    worker: bool = True,
) -> FastAPI:
    """The HTTP API and web page of a steadyrun ``App`` (or of a bare runtime).

    Args:
        app_or_runtime: What to serve; a runtime is wrapped in an ``App`` with its agents.
        tokens: Accepted bearer tokens; by default those of ``STEADYRUN_API_TOKENS``
            (comma-separated). At least one is needed.
        max_body_bytes: Larger request bodies are refused with 413.
        stream_poll_seconds: How often a followed run that does not execute in this process
            is reloaded from the store (and how often a keep-alive is sent).
        worker: Whether the app's embedded worker executes runs; ``False`` for an API-only
            process (``steadyrun serve --no-worker``) next to separate workers. The worker
            starts with the server (the lifespan) and stops gracefully with it.

    Raises:
        UsageError: No token is configured.
    """
    app = app_or_runtime if isinstance(app_or_runtime, App) else App(app_or_runtime)
    if not worker:
        app.run_worker = False
    if tokens is None:
        tokens = [t.strip() for t in os.environ.get(TOKENS_ENV, "").split(",") if t.strip()]
    if not tokens or any(not t for t in tokens):
        raise UsageError(
            f"the API needs at least one non-empty bearer token: pass tokens=[...] or set "
            f"{TOKENS_ENV}"
        )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await app.open()
        try:
            yield
        finally:
            await app.close()

    api = FastAPI(
        lifespan=lifespan,
        title="steadyrun",
        summary="Durable runs of tool-calling agents: runs, approvals, answers, live display.",
        version="1",
        docs_url=None,  # Swagger UI loads from a CDN; the page and the API do not
        redoc_url=None,
        responses=_ERROR_RESPONSES,
    )
    api.state.steadyrun = app
    _errors(api)
    _routes(api, app, stream_poll_seconds)
    api.mount("/static", StaticFiles(directory=STATIC), name="static")
    api.add_middleware(
        RequestGate,
        tokens=list(tokens),
        max_body_bytes=max_body_bytes,
        public=lambda path: path in ("/", "/health", "/favicon.ico") or path.startswith("/static/"),
        query_token=lambda path: path.startswith("/runs/") and path.endswith("/stream"),
    )
    return api


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    body = {"error": code, "message": message, **{k: v for k, v in extra.items() if v}}
    return JSONResponse(status_code=status, content=body)


def _errors(api: FastAPI) -> None:
    for cls, status, code in _ERRORS:

        def handler(
            request: Request, exc: Exception, status: int = status, code: str = code
        ) -> JSONResponse:
            return _error(status, code, str(exc))

        api.add_exception_handler(cls, handler)

    def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        details = [
            {"where": ".".join(str(p) for p in e.get("loc", ())), "problem": e.get("msg", "")}
            for e in exc.errors()
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

    def crashed(request: Request, exc: Exception) -> JSONResponse:
        error_id = uuid.uuid4().hex[:12]
        log.error(
            "internal error %s on %s %s", error_id, request.method, request.url.path, exc_info=exc
        )
        return _error(500, "internal", "internal server error", error_id=error_id)

    api.add_exception_handler(RequestValidationError, invalid)
    api.add_exception_handler(StarletteHTTPException, http)
    api.add_exception_handler(StoreError, store_failed)
    api.add_exception_handler(Exception, crashed)


def _call_out(record: CallRecord) -> CallOut:
    shown = display_call(record)
    decision = to_plain(shown.decision) if shown.decision is not None else None
    return CallOut(
        id=shown.id,
        name=shown.name,
        arguments=shown.arguments,
        status=shown.status,
        result=shown.result,
        error=shown.error,
        handover=shown.handover,
        decision=decision,
    )


def _routes(api: FastAPI, app: App, poll: float) -> None:  # noqa: C901 - one route table
    @api.get("/health", tags=["service"])
    async def health() -> dict[str, str]:
        """Whether the service is up (no token needed)."""
        return {"status": "ok"}

    @api.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @api.get("/agents", tags=["runs"])
    async def agents() -> AgentList:
        """The agents runs can be started with."""
        return AgentList(agents=sorted(app.agents))

    @api.get("/runs", tags=["runs"])
    async def list_runs(
        status: RunStatus | None = None,
        agent: str | None = None,
        updated_before: datetime | None = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> RunList:
        """Runs by last activity, newest first; page with ``updated_before``."""
        found = await app.store.list_runs(
            status=status, agent=agent, updated_before=updated_before, limit=limit
        )
        return RunList(
            runs=[
                RunOut(
                    run_id=r.run_id,
                    agent=r.agent,
                    status="running" if app.executing(r.run_id) else r.status,
                    created_at=r.created_at,
                    updated_at=r.updated_at,
                    steps=r.steps,
                    executing=app.executing(r.run_id),
                )
                for r in found
            ]
        )

    @api.post(
        "/runs",
        tags=["runs"],
        status_code=202,
        responses={200: {"model": StartOut, "description": "The same request started it before."}},
    )
    async def start(body: StartRequest) -> Response:
        """Start a run in the background (202).

        The same request again answers 200 with the same run; a different request under the
        same run id answers 409.
        """
        run_id = body.run_id or uuid.uuid4().hex
        fingerprint = start_fingerprint(body.agent, body.input)
        started = await app.start(run_id, body.agent, body.input, fingerprint=fingerprint)
        out = StartOut(run_id=started.run_id, created=started.created, status=started.status)
        return JSONResponse(status_code=202 if started.created else 200, content=out.model_dump())

    @api.get(
        "/runs/{run_id}",
        tags=["runs"],
        response_class=Response,
        responses={200: {"content": {"application/json": {}}, "description": _SNAPSHOT_DOC}},
    )
    async def show(run_id: str) -> Response:
        """The run as a display shows it: status, blocks, calls, plan, usage, pending."""
        snapshot = await app.publisher.snapshot(run_id)
        return Response(to_json(snapshot), media_type="application/json")

    @api.post("/runs/{run_id}/resume", tags=["runs"], status_code=202)
    async def resume(run_id: str) -> ResumeOut:
        """Wake a suspended, failed or crashed run up: a worker continues it."""
        return ResumeOut(run_id=run_id, scheduled=await app.resume(run_id))

    @api.get("/runs/{run_id}/history", tags=["runs"])
    async def history(run_id: str) -> HistoryOut:
        """The run's steps (safe points), oldest first, with the messages and calls each added."""
        steps = await app.history(run_id)
        return HistoryOut(run_id=run_id, steps=[step_out(s) for s in steps])

    @api.post(
        "/runs/{run_id}/fork",
        tags=["runs"],
        status_code=202,
        responses={200: {"model": ForkOut, "description": "The same fork was made before."}},
    )
    async def fork(run_id: str, body: ForkRequest) -> Response:
        """Fork the run at one of its steps into a new run, which a worker continues (202).

        The new run's context is the run's after that step, with its last message replaced
        by ``edit`` when given; calls after the step are not carried and nothing the run did
        runs again unless the new run's model asks. The same request again answers 200.
        """
        new_run_id = body.new_run_id or uuid.uuid4().hex
        edit = edit_message(body.edit) if body.edit is not None else None
        forked = await app.fork(
            run_id, at=body.at, new_run_id=new_run_id, edit=edit, resume=body.resume
        )
        out = fork_out(forked)
        return JSONResponse(status_code=202 if forked.created else 200, content=out.model_dump())

    @api.post("/runs/{run_id}/cancel", tags=["runs"])
    async def cancel(run_id: str) -> CancelOut:
        """Cancel a run: it stops, its open calls and sub-agent runs are cancelled."""
        done = await app.cancel(run_id)
        return CancelOut(
            run_id=run_id,
            runs=done.runs,
            calls=[f"{run}:{call}" for run, call in done.calls],
        )

    @api.post("/runs/{run_id}/messages", tags=["runs"], status_code=202)
    async def send(run_id: str, body: MessageRequest) -> MessageOut:
        """Give a run input; it takes it at its next safe point (resumed if need be)."""
        stored = await app.send(run_id, body.text, id=body.id, revision=body.revision)
        return MessageOut(seq=stored.seq, id=stored.id, revision=stored.revision)

    @api.get("/runs/{run_id}/pending", tags=["host"])
    async def pending(run_id: str) -> PendingList:
        """What the run waits for (decisions, inputs, results) and what its host owns."""
        items = await app.runtime.pending(run_id)
        return PendingList(
            items=[
                PendingOut(
                    kind=i.kind,
                    blocking=i.blocking,
                    call_id=i.call_id,
                    name=i.name,
                    arguments=i.arguments,
                    prompt=i.prompt,
                    wait_id=i.wait_id,
                    response_schema=i.response_schema,
                    payload=to_plain(i.payload) if i.payload is not None else None,
                )
                for i in items
            ]
        )

    @api.post("/runs/{run_id}/calls/{call_id}/decision", tags=["host"])
    async def decide(run_id: str, call_id: str, body: DecideRequest) -> CallOut:
        """Approve (optionally with edited arguments) or reject a call waiting for a decision.

        The run goes on in the background once nothing else blocks it.
        """
        record = await app.decide(
            run_id,
            call_id,
            approve=body.approve,
            reason=body.reason,
            arguments=body.arguments,
            decided_by=body.decided_by,
        )
        return _call_out(record)

    @api.post("/runs/{run_id}/waits/{wait_id}/answer", tags=["host"])
    async def answer(run_id: str, wait_id: str, body: AnswerRequest) -> CallOut:
        """Answer an input request; the answer must fit its response schema."""
        return _call_out(await app.answer(run_id, wait_id, body.response))

    @api.post("/runs/{run_id}/calls/{call_id}/settle", tags=["host"])
    async def settle(run_id: str, call_id: str, body: SettleRequest) -> CallOut:
        """Record the outcome of a call the host owns (awaited, detached, submitted, review)."""
        record = await app.settle(run_id, call_id, result=body.result, error=body.error)
        return _call_out(record)

    @api.get(
        "/runs/{run_id}/stream",
        tags=["runs"],
        response_class=EventSourceResponse,
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    async def stream(
        run_id: str,
        request: Request,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
        until: Annotated[Literal["forever", "done"], Query()] = "forever",
        token: Annotated[
            str | None,
            Query(
                description="The bearer token, for EventSource clients that cannot send "
                "headers (it may end up in access logs: prefer the header)."
            ),
        ] = None,
    ) -> EventSourceResponse:
        """The run's display stream as server-sent events.

        First a ``snapshot`` event (or, with ``Last-Event-ID``, the ``delta`` events after it
        while the server still holds them), then a ``delta`` event per change. Each event's
        ``id`` resumes the stream; its data is versioned JSON. ``until=done`` ends the stream
        once the run completed or failed.
        """
        await app.publisher.snapshot(run_id)  # 404 before the stream starts

        async def events() -> AsyncIterator[ServerSentEvent]:
            yield ServerSentEvent(retry=2000, sep=_SEP)
            async for event in app.publisher.follow(run_id, last_event_id, poll_interval=poll):
                # The publisher's keep-alives only wake the until=done check below: the
                # response's own pings keep the connection open.
                if event.kind != "keepalive":
                    data = event.data().decode()
                    yield ServerSentEvent(data, id=event.id, event=event.kind, sep=_SEP)
                if until == "done" and _done(app, run_id, event.id):
                    return

        return EventSourceResponse(
            events(),
            headers={"Cache-Control": "no-cache"},
            ping=poll,
            ping_message_factory=lambda: ServerSentEvent(comment="keepalive", sep=_SEP),
            sep=_SEP,
        )


def _done(app: App, run_id: str, event_id: str) -> bool:
    current = app.publisher.current(run_id)
    if current is None or app.executing(run_id):
        return False
    caught_up = event_id.rpartition(".")[2] == str(current.seq)
    return caught_up and current.status in ("completed", "failed")
