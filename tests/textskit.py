"""The check that models read no English sentence of the runtime's: fragments and what was read.

Shared by ``tests/runtime/test_texts_wired*.py``: ``FRAGMENTS`` are the static pieces of the
English defaults of ``Texts``; ``received`` gathers everything models were sent;
``assert_no_english`` fails on any fragment in it.
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from dataclasses import fields

from steadyrun._texts import Texts
from steadyrun.chat import ModelRequest, TextPart, ToolResultPart

__all__ = ["EN", "FRAGMENTS", "ZH", "assert_no_english", "english_fragments", "received", "results"]

ZH = Texts.chinese()
EN = Texts()


def english_fragments() -> list[str]:
    """The static parts of the English defaults long enough to be a sentence's piece."""
    out: set[str] = set()
    for f in fields(Texts):
        for literal, _field, _spec, _conv in string.Formatter().parse(getattr(EN, f.name)):
            piece = literal.strip()
            if len(piece) >= 12:
                out.add(piece)
    return sorted(out)


FRAGMENTS = english_fragments()


def received(requests: Iterable[ModelRequest], *, tool_docs: Iterable[str] = ()) -> list[str]:
    """Every text a model received; the descriptions of the tools named in ``tool_docs`` too."""
    docs = set(tool_docs)
    out: list[str] = []
    for request in requests:
        out.append(request.instructions or "")
        for message in request.messages:
            for part in message.parts:
                if isinstance(part, TextPart):
                    out.append(part.text)
                elif isinstance(part, ToolResultPart):
                    out.append(part.content)
        for tool in request.tools:
            if tool.name in docs:
                out.append(tool.description)
                out += [
                    str(p.get("description", "")) for p in tool.parameters["properties"].values()
                ]
    return out


def assert_no_english(texts: list[str]) -> None:
    """Fail on the first English fragment found in ``texts``."""
    for fragment in FRAGMENTS:
        for t in texts:
            assert fragment not in t, f"English {fragment!r} in {t!r}"


def results(request: ModelRequest) -> list[str]:
    """The tool results of a request's last tool message."""
    last = [m for m in request.messages if m.role == "tool"][-1]
    return [p.content for p in last.parts if isinstance(p, ToolResultPart)]
