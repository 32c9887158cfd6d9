"""The HTTP API: runs, host operations, the live display stream (SSE) and the web page."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from sse_starlette import EventSourceResponse, ServerSentEvent

from steadyrun._errors import RunNotFoundError, UsageError
from steadyrun.records import RunStatus
from steadyrun.runtime import Runtime
from steadyrun.runtime._host import BY_META
from steadyrun.service._app import App
from steadyrun.service._gate import PRINCIPAL_SCOPE, RequestGate, Token, parse_tokens, principals
from steadyrun.service._history import edit_message, fork_out, step_out
from steadyrun.service._http_errors import (
    complete_openapi,
    error_responses,
    install_error_handlers,
)
from steadyrun.service._paging import RunQuery, decode_cursor, encode_cursor, scan_runs
from steadyrun.service._schemas import (
    AgentList,
    AnswerRequest,
    CallOut,
    CancelOut,
    DecideRequest,
    ForkOut,
    ForkRequest,
    HistoryOut,
    InboxItem,
    InboxList,
    MessageOut,
    MessageRequest,
    PendingList,
    ResumeOut,
    RunList,
    RunOut,
    SettleRequest,
    StartOut,
    StartRequest,
    TaskList,
    WhoOut,
)
from steadyrun.service._shapes import call_out, pending_out, run_out, snapshot_schemas, task_out
from steadyrun.service._start import start_fingerprint
from steadyrun.stores import RunSummary
from steadyrun.stream import StreamEvent, to_json

__all__ = ["TOKENS_ENV", "create_app"]


TOKENS_ENV = "STEADYRUN_API_TOKENS"
"""Environment variable with the API's bearer tokens (when none are passed): comma-separated,
each ``principal:token`` or a bare token (whose principal is ``operator``)."""

STATIC = Path(__file__).parent / "static"

# Events end in a blank line of "\n"s (sse-starlette's default is "\r\n"): the web page and
# the clients written against the stream split on "\n\n".
_SEP = "\n"

# Every route but /health needs a token; every route may meet a failing store.
_ALWAYS = error_responses(401, 503)
_RUN = error_responses(404)
_BODY = error_responses(400, 413, 422)
_WRITE = error_responses(409)

_SNAPSHOT_DOC = (
    "The run's display snapshot as versioned JSON: "
    '`{"format": 1, "data": DisplaySnapshot}` (see docs/service.md).'
)


def create_app(
    app_or_runtime: App | Runtime,
    *,
    tokens: Sequence[str | Token] | Mapping[str, str] | None = None,
    max_body_bytes: int = 1_000_000,
    stream_poll_seconds: float = 1.0,
    worker: bool = True,
) -> FastAPI:
    """The HTTP API and web page of a steadyrun ``App`` (or of a bare runtime).

    Args:
        app_or_runtime: What to serve; a runtime is wrapped in an ``App`` with its agents.
        tokens: Accepted bearer tokens with who holds each: a mapping of token to principal,
            or tokens (``Token(value, principal)``, or a bare string: principal
            ``operator``). By default those of ``STEADYRUN_API_TOKENS``. At least one is
            needed. Every write a request makes records its token's principal.
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
    try:
        holders = (
            principals(tokens)
            if tokens is not None
            else parse_tokens(os.environ.get(TOKENS_ENV, ""))
        )
    except UsageError as exc:
        raise UsageError(f"{exc}: pass tokens=[...] or set {TOKENS_ENV}") from None

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
    )
    api.state.steadyrun = app
    install_error_handlers(api)
    _routes(api, app, stream_poll_seconds)
    complete_openapi(api, public={"/health"}, schemas=snapshot_schemas())
    api.mount("/static", StaticFiles(directory=STATIC), name="static")
    api.add_middleware(
        RequestGate,
        tokens=holders,
        max_body_bytes=max_body_bytes,
        public=lambda path: path in ("/", "/health", "/favicon.ico") or path.startswith("/static/"),
        query_token=lambda path: path.startswith("/runs/") and path.endswith("/stream"),
    )
    return api


async def _principal(request: Request) -> str:
    """Who the request's token says the caller is (the gate checked it).

    A coroutine: FastAPI runs a plain function dependency in a worker thread, which cost
    each request two thread switches (and the GIL passed back and forth) to read the scope.
    """
    return str(request.scope.get(PRINCIPAL_SCOPE, ""))


Who = Annotated[str, Depends(_principal)]


def _query(
    status: RunStatus | None,
    agent: str | None,
    id_prefix: str | None,
    updated_after: datetime | None,
    updated_before: datetime | None,
    cursor: str | None,
) -> RunQuery:
    return RunQuery(
        status=status,
        agent=agent,
        id_prefix=id_prefix,
        updated_after=updated_after,
        updated_before=updated_before,
        cursor=decode_cursor(cursor) if cursor else None,
    )


def _routes(api: FastAPI, app: App, poll: float) -> None:  # noqa: C901 - one route table
    @api.get("/health", tags=["service"])
    async def health() -> dict[str, str]:
        """Whether the service is up (no token needed)."""
        return {"status": "ok"}

    @api.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @api.get("/whoami", tags=["service"], responses=_ALWAYS)
    async def whoami(who: Who) -> WhoOut:
        """The principal of the request's token: who the writes it makes are recorded as."""
        return WhoOut(principal=who)

    @api.get("/agents", tags=["runs"], responses=_ALWAYS)
    async def agents() -> AgentList:
        """The agents runs can be started with."""
        return AgentList(agents=sorted(app.agents))

    @api.get("/runs", tags=["runs"], responses={**_ALWAYS, **error_responses(422)})
    async def list_runs(
        status: RunStatus | None = None,
        agent: str | None = None,
        id_prefix: Annotated[
            str | None, Query(max_length=200, description="Only runs whose id starts so.")
        ] = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        cursor: Annotated[
            str | None, Query(max_length=1000, description="next_cursor of the previous page.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> RunList:
        """Runs by last activity, newest first; page with ``cursor`` (``next_cursor``)."""
        query = _query(status, agent, id_prefix, updated_after, updated_before, cursor)
        listed: list[RunOut] = []

        async def take(run: RunSummary) -> int:
            listed.append(run_out(app, run))
            return 1

        last = await scan_runs(app.store, query, take, enough=limit)
        return RunList(runs=listed, next_cursor=encode_cursor(last) if last else None)

    @api.get("/inbox", tags=["host"], responses={**_ALWAYS, **error_responses(422)})
    async def inbox(
        kind: Annotated[
            list[
                Literal[
                    "result", "decision", "input", "review", "submission", "detached", "task_input"
                ]
            ]
            | None,
            Query(description="Only items of these kinds (repeat the parameter for more)."),
        ] = None,
        agent: str | None = None,
        cursor: Annotated[
            str | None, Query(max_length=1000, description="next_cursor of the previous page.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> InboxList:
        """Everything waiting for a person across runs, runs by last activity, newest first.

        Approvals (``decision``), input requests (``input``), awaited results (``result``),
        needs-review calls (``review``), and calls the host owns while the run goes on
        (``submission``, ``detached``). A page holds the items of whole runs (so it may hold
        a few more than ``limit``); it may hold none and still have a ``next_cursor`` when
        the runs it looked at waited for nothing.
        """
        found: list[InboxItem] = []
        kinds = set(kind) if kind else None

        async def take(run: RunSummary) -> int:
            if run.status == "cancelled":
                return 0
            try:
                items = await app.runtime.pending(run.run_id)
            except RunNotFoundError:
                return 0  # deleted meanwhile
            kept = [i for i in items if kinds is None or i.kind in kinds]
            found.extend(
                InboxItem(
                    run_id=run.run_id,
                    agent=run.agent,
                    run_status=run.status,
                    updated_at=run.updated_at,
                    item=pending_out(i),
                )
                for i in kept
            )
            return len(kept)

        query = _query(None, agent, None, None, None, cursor)
        last = await scan_runs(app.store, query, take, enough=limit, most=max(200, 4 * limit))
        return InboxList(items=found, next_cursor=encode_cursor(last) if last else None)

    @api.post(
        "/runs",
        tags=["runs"],
        status_code=202,
        response_model=StartOut,
        responses={
            200: {"model": StartOut, "description": "The same request started it before."},
            **_ALWAYS,
            **_BODY,
            **_WRITE,
        },
    )
    async def start(body: StartRequest, who: Who) -> Response:
        """Start a run in the background (202).

        The same request again answers 200 with the same run; a different request under the
        same run id answers 409. The input records who started it.
        """
        run_id = body.run_id or uuid.uuid4().hex
        fingerprint = start_fingerprint(body.agent, body.input)
        started = await app.start(run_id, body.agent, body.input, fingerprint=fingerprint, by=who)
        out = StartOut(run_id=started.run_id, created=started.created, status=started.status)
        status = 202 if started.created else 200
        return JSONResponse(status_code=status, content=out.model_dump())

    @api.get(
        "/runs/{run_id}",
        tags=["runs"],
        response_class=Response,
        responses={
            200: {
                "content": {
                    "application/json": {
                        "schema": {"$ref": "#/components/schemas/SnapshotDocument"}
                    }
                },
                "description": _SNAPSHOT_DOC,
            },
            **_ALWAYS,
            **_RUN,
        },
    )
    async def show(run_id: str) -> Response:
        """The run as a display shows it: status, blocks, calls, plan, usage, pending."""
        snapshot = await app.publisher.snapshot(run_id)
        return Response(to_json(snapshot), media_type="application/json")

    @api.post(
        "/runs/{run_id}/resume",
        tags=["runs"],
        status_code=202,
        responses={**_ALWAYS, **_RUN, **_WRITE, **error_responses(422)},
    )
    async def resume(run_id: str) -> ResumeOut:
        """Wake a suspended, failed or crashed run up: a worker continues it.

        A completed run (409: send it a message instead) or a cancelled one (409) is not
        resumed.
        """
        return ResumeOut(run_id=run_id, scheduled=await app.resume(run_id))

    @api.get("/runs/{run_id}/history", tags=["runs"], responses={**_ALWAYS, **_RUN})
    async def history(run_id: str) -> HistoryOut:
        """The run's steps (safe points), oldest first, with the messages and calls each added."""
        steps = await app.history(run_id)
        return HistoryOut(run_id=run_id, steps=[step_out(s) for s in steps])

    @api.post(
        "/runs/{run_id}/fork",
        tags=["runs"],
        status_code=202,
        response_model=ForkOut,
        responses={
            200: {"model": ForkOut, "description": "The same fork was made before."},
            **_ALWAYS,
            **_RUN,
            **_BODY,
            **_WRITE,
        },
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
        status = 202 if forked.created else 200
        return JSONResponse(status_code=status, content=out.model_dump())

    @api.post("/runs/{run_id}/cancel", tags=["runs"], responses={**_ALWAYS, **_RUN, **_WRITE})
    async def cancel(run_id: str, who: Who) -> CancelOut:
        """Cancel a run: it stops, its open calls and sub-agent runs are cancelled.

        Cancelling a cancelled run again answers the same (200, what the cancel cancelled,
        who cancelled it); a completed run cannot be cancelled (409).
        """
        done = await app.cancel(run_id, by=who)
        by: str | None = who
        if not done.runs:  # cancelled before: answer as the cancel that did it answered
            done = await app.cancelled(run_id)
            snap = await app.store.load(run_id)
            by = snap.run.cancelled_by if snap is not None else None
        return CancelOut(
            run_id=run_id,
            runs=done.runs,
            calls=[f"{run}:{call}" for run, call in done.calls],
            by=by,
        )

    @api.post(
        "/runs/{run_id}/messages",
        tags=["runs"],
        status_code=202,
        responses={**_ALWAYS, **_RUN, **_BODY, **_WRITE},
    )
    async def send(run_id: str, body: MessageRequest, who: Who) -> MessageOut:
        """Give a run input; it takes it at its next safe point (resumed if need be).

        The same ``id`` (and ``revision``) again is not added again: the answer is the message
        first stored, with who sent it.
        """
        stored = await app.send(run_id, body.text, id=body.id, revision=body.revision, by=who)
        by = (stored.meta or {}).get(BY_META)
        return MessageOut(seq=stored.seq, id=stored.id, revision=stored.revision, by=by)

    @api.get("/runs/{run_id}/pending", tags=["host"], responses={**_ALWAYS, **_RUN})
    async def pending(run_id: str) -> PendingList:
        """What the run waits for (decisions, inputs, results) and what its host owns."""
        items = await app.runtime.pending(run_id)
        return PendingList(items=[pending_out(i) for i in items])

    @api.get("/runs/{run_id}/tasks", tags=["host"], responses={**_ALWAYS, **_RUN})
    async def tasks(run_id: str) -> TaskList:
        """The run's background tasks, oldest first, whichever engine executes the run."""
        return TaskList(tasks=[task_out(t) for t in await app.tasks(run_id)])

    @api.post(
        "/runs/{run_id}/calls/{call_id}/decision",
        tags=["host"],
        responses={**_ALWAYS, **_RUN, **_BODY, **_WRITE},
    )
    async def decide(run_id: str, call_id: str, body: DecideRequest, who: Who) -> CallOut:
        """Approve (optionally with edited arguments) or reject a call waiting for a decision.

        The run goes on in the background once nothing else blocks it. The decision records
        the token's principal as ``decided_by``. The same decision again answers 200 with the
        call as it is now; a different one answers 409.
        """
        record = await app.decide(
            run_id,
            call_id,
            approve=body.approve,
            reason=body.reason,
            arguments=body.arguments,
            by=who,
        )
        return call_out(record)

    @api.post(
        "/runs/{run_id}/waits/{wait_id}/answer",
        tags=["host"],
        responses={**_ALWAYS, **_RUN, **_BODY, **_WRITE},
    )
    async def answer(run_id: str, wait_id: str, body: AnswerRequest, who: Who) -> CallOut:
        """Answer an input request; the answer must fit its response schema.

        The answer records the token's principal as ``answered_by``. The same answer again
        answers 200 with the call as it is now; a different one answers 409.
        """
        return call_out(await app.answer(run_id, wait_id, body.response, by=who))

    @api.post(
        "/runs/{run_id}/calls/{call_id}/settle",
        tags=["host"],
        responses={**_ALWAYS, **_RUN, **_BODY, **_WRITE},
    )
    async def settle(run_id: str, call_id: str, body: SettleRequest, who: Who) -> CallOut:
        """Record the outcome of a call the host owns (awaited, detached, submitted, review).

        The outcome records the token's principal as ``settled_by``. The same outcome again
        answers 200 with the call as it is now; a different one answers 409.
        """
        record = await app.settle(run_id, call_id, result=body.result, error=body.error, by=who)
        return call_out(record)

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
        if app.publisher.current(run_id) is None:
            # 404 before the stream starts. A run held in memory is known: the follower's first
            # look reloads it if need be, so it is not read here too.
            await app.publisher.snapshot(run_id)

        async def events() -> AsyncIterator[ServerSentEvent | bytes]:
            yield ServerSentEvent(retry=2000, sep=_SEP)
            async for event in app.publisher.follow(run_id, last_event_id, poll_interval=poll):
                # The publisher's keep-alives only wake the until=done check below: the
                # response's own pings keep the connection open.
                if event.kind != "keepalive":
                    yield event.rendered(_sse_frame)
                if until == "done" and await _ended(app, run_id, event.id, poll):
                    return

        return EventSourceResponse(
            events(),
            headers={"Cache-Control": "no-cache"},
            ping=poll,
            ping_message_factory=lambda: ServerSentEvent(comment="keepalive", sep=_SEP),
            sep=_SEP,
        )


def _sse_frame(event: StreamEvent) -> bytes:
    """An event as an SSE frame: rendered once for all the clients it goes to."""
    data = event.data().decode()
    return ServerSentEvent(data, id=event.id, event=event.kind, sep=_SEP).encode()


async def _ended(app: App, run_id: str, event_id: str, poll: float) -> bool:
    """Whether a follower at ``event_id`` has seen the run complete or fail, for good.

    The run's last change is published from inside its execution, so the follower usually
    gets it while the worker still executes the run: rather than look again at the next
    keep-alive (a poll interval later), wait here for the execution to end (at most a poll
    interval: a run that moves on meanwhile is followed on at the next look).
    """
    if not _caught_up_final(app, run_id, event_id):
        return False
    if app.executing(run_id):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(app.finished(run_id), poll)
        if app.executing(run_id) or not _caught_up_final(app, run_id, event_id):
            return False
    return True


def _caught_up_final(app: App, run_id: str, event_id: str) -> bool:
    current = app.publisher.current(run_id)
    if current is None:
        return False
    caught_up = event_id.rpartition(".")[2] == str(current.seq)
    return caught_up and current.status in ("completed", "failed")
