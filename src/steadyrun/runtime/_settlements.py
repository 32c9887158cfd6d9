"""Telling the model how a call it handed over ended: a notice in the run's feed (opt-in).

A detached or submitted call gave the model a receipt and the run carried on; the host's later
``settle`` is recorded on the call, which the model's context no longer reads. With
``Runtime(post_settlements=True)`` the outcome is also posted to the run's feed, so the model
learns it at the run's next turn (the worker resumes the run, as for any input).
"""

from __future__ import annotations

from steadyrun._texts import Texts
from steadyrun.records import CallRecord
from steadyrun.runtime._batch_results import truncated
from steadyrun.stores import FeedMessage
from steadyrun.tools import DEFAULT_MAX_RESULT_CHARS

__all__ = ["SETTLED_META", "settlement_notice"]

SETTLED_META = "steadyrun.settled"
"""Meta key of a posted settlement: the record id of the call it is about."""


def settlement_notice(call: CallRecord, texts: Texts) -> FeedMessage | None:
    """The feed message telling the model how ``call`` ended; ``None`` when it needs none.

    Only a settled call the run carried on past (handover ``detached`` or ``submitted``) needs
    one: an awaited result, or a reviewed call whose batch is still open, reaches the model in
    its batch. The message id is derived from the call, so a repeated ``settle`` (accepted, as
    the same outcome) does not post twice. The text is bounded as a tool result is.
    """
    if not call.settled or call.handover not in ("detached", "submitted"):
        return None
    fmt = {"call_id": call.provider_call_id or call.id, "name": call.name}
    if call.status == "succeeded":
        result = _bounded(call.result or "", call.name, texts)
        content = texts.settled_result.format(result=result, **fmt)
    else:
        error = _bounded(call.error or call.result or "", call.name, texts)
        content = texts.settled_error.format(error=error, **fmt)
    return FeedMessage(
        id=f"{call.id}:settled", role="system", content=content, meta={SETTLED_META: call.id}
    )


def _bounded(text: str, name: str, texts: Texts) -> str:
    if len(text) <= DEFAULT_MAX_RESULT_CHARS:
        return text
    return truncated(text, DEFAULT_MAX_RESULT_CHARS, name, texts)
