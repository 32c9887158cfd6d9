"""The model port, provider errors and retries, and choosing a model by name.

Provider adapters live in their own modules (``steadyrun.models.openai``, ``.anthropic``,
``.google``, ``.compat``, ``.local``), each needing its extra.
"""

from steadyrun._errors import LocalBuildError
from steadyrun.models._client import (
    ModelClient,
    StreamingModelClient,
    allow_model_requests,
    check_model_requests_allowed,
    model_requests,
    model_requests_allowed,
    stream_response,
)
from steadyrun.models._errors import (
    AuthenticationFailed,
    BadRequest,
    ContextOverflow,
    MalformedResponse,
    Overloaded,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    ServerError,
    error_for_status,
)
from steadyrun.models._registry import (
    ProviderFactory,
    check_model_spec,
    register_provider,
    resolve_model,
)
from steadyrun.models._retry import RetryPolicy, call_with_retries
from steadyrun.models._structured import StructuredOutputError, StructuredResult, generate_object

__all__ = [
    "AuthenticationFailed",
    "BadRequest",
    "ContextOverflow",
    "LocalBuildError",
    "ModelClient",
    "MalformedResponse",
    "Overloaded",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderFactory",
    "ProviderTimeout",
    "RateLimited",
    "RetryPolicy",
    "ServerError",
    "StreamingModelClient",
    "StructuredOutputError",
    "StructuredResult",
    "allow_model_requests",
    "call_with_retries",
    "check_model_requests_allowed",
    "check_model_spec",
    "error_for_status",
    "generate_object",
    "model_requests",
    "model_requests_allowed",
    "register_provider",
    "resolve_model",
    "stream_response",
]
