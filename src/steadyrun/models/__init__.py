"""The model port and helpers; provider adapters live beside it."""

from steadyrun.models._client import (
    ModelClient,
    StreamingModelClient,
    allow_model_requests,
    check_model_requests_allowed,
    model_requests_allowed,
    stream_response,
)

__all__ = [
    "ModelClient",
    "StreamingModelClient",
    "allow_model_requests",
    "check_model_requests_allowed",
    "model_requests_allowed",
    "stream_response",
]
