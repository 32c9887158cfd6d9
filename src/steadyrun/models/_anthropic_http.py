"""Letting the Anthropic SDK (built on ``httpx2``) send through an ``httpx.AsyncClient``.

The SDK refuses ``httpx`` objects. steadyrun's adapters take an ``httpx.AsyncClient`` (proxies,
custom transports, test replays), so this module wraps one in an ``httpx2`` transport that
forwards each request to it and streams the answer back. ``httpx`` itself is optional: it is
imported only when such a client is passed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx2

from steadyrun._errors import UsageError

if TYPE_CHECKING:
    import httpx

__all__ = ["sdk_http_client"]


def sdk_http_client(http_client: Any) -> httpx2.AsyncClient | None:
    """The ``httpx2`` client the SDK should use for ``http_client`` (``None``: the SDK's own).

    Args:
        http_client: ``None``, an ``httpx2.AsyncClient`` (used as it is) or an
            ``httpx.AsyncClient`` (wrapped so the SDK sends through it).
    """
    if http_client is None or isinstance(http_client, httpx2.AsyncClient):
        return http_client
    module = type(http_client).__module__.partition(".")[0]
    if module == "httpx":
        import httpx

        if isinstance(http_client, httpx.AsyncClient):
            # Same timeouts, so the SDK treats a client with httpx's defaults as it treats one
            # with httpx2's (its own defaults apply) and honors timeouts set on purpose.
            t = http_client.timeout
            timeout = httpx2.Timeout(connect=t.connect, read=t.read, write=t.write, pool=t.pool)
            return httpx2.AsyncClient(transport=_HttpxBridge(http_client), timeout=timeout)
    raise UsageError(
        "http_client must be an httpx.AsyncClient or an httpx2.AsyncClient, "
        f"got {type(http_client).__module__}.{type(http_client).__name__}"
    )


class _HttpxBridge(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that sends every request through an ``httpx.AsyncClient``."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        import httpx

        content = await request.aread()
        timeout = request.extensions.get("timeout")
        outgoing = self._client.build_request(
            request.method,
            str(request.url),
            headers=request.headers.multi_items(),
            content=content,
            timeout=httpx.Timeout(**timeout) if isinstance(timeout, dict) else None,
        )
        try:
            response = await self._client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            raise _translate(exc, request) from exc
        # The body is passed on decoded (an already read response has no raw bytes left), so
        # the headers that describe the encoded body go.
        headers = [
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in ("content-encoding", "content-length")
        ]
        return httpx2.Response(
            response.status_code,
            headers=headers,
            stream=_BridgedStream(response, request),
            request=request,
        )

    async def aclose(self) -> None:
        """Nothing to close: the ``httpx.AsyncClient`` belongs to the caller."""


class _BridgedStream(httpx2.AsyncByteStream):
    """The body of an ``httpx`` response, read as it arrives."""

    def __init__(self, response: httpx.Response, request: httpx2.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import httpx

        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            raise _translate(exc, self._request) from exc

    async def aclose(self) -> None:
        await self._response.aclose()


def _translate(exc: Exception, request: httpx2.Request) -> httpx2.HTTPError:
    """The ``httpx2`` error of the same kind as an ``httpx`` one (the SDK types errors by it)."""
    cls = getattr(httpx2, type(exc).__name__, None)
    if isinstance(cls, type) and issubclass(cls, httpx2.TransportError):
        return cls(str(exc), request=request)
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return httpx2.ReadTimeout(str(exc), request=request)
    return httpx2.TransportError(str(exc) or type(exc).__name__, request=request)
