"""Media by reference: what a run stores (``MediaRef``), and how the runtime hands media to models.

Hosts store media bytes themselves and give the runtime a reader (and optionally a URL
function) through ``MediaOptions``; see docs/media.md.
"""

from steadyrun.chat import MediaPart, MediaRef
from steadyrun.media._prepare import (
    MediaAdapter,
    MediaOptions,
    MediaPreparer,
    MediaWatch,
    has_media,
    media_kind,
    model_media,
)
from steadyrun.media._supply import (
    MediaSupply,
    media_ref,
    supplied_bytes,
    supplied_url,
    supplying,
)

__all__ = [
    "MediaAdapter",
    "MediaOptions",
    "MediaPart",
    "MediaPreparer",
    "MediaRef",
    "MediaSupply",
    "MediaWatch",
    "has_media",
    "media_kind",
    "media_ref",
    "model_media",
    "supplied_bytes",
    "supplied_url",
    "supplying",
]
