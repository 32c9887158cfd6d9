"""The page's rendering of a call, in Node with a minimal DOM (no browser needed).

The browser test drives the whole page in Chromium; this one checks what a tool call block
shows, from the JSON the stream sends, wherever Node is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import steadyrun
from steadyrun._codec import to_plain
from steadyrun.records import CallDecision, CallRecord
from steadyrun.stream import display_call

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js")
APP_JS = Path(steadyrun.__file__).parent / "service" / "static" / "app.js"

# Just enough DOM for app.js to load and build elements; text() flattens an element.
HARNESS = r"""
const fs = require("fs"), vm = require("vm");
class El {
  constructor(tag) { this.tag = tag; this.children = []; this.attrs = {}; this.className = ""; }
  append(...cs) { this.children.push(...cs); }
  replaceChildren(...cs) { this.children = cs; }
  setAttribute(k, v) { this.attrs[k] = v; }
  addEventListener() {}
}
const stub = () => new El("div");
const ctx = {
  document: { createElement: (t) => new El(t), createTextNode: (t) => ({ text: t }),
              getElementById: stub },
  window: { addEventListener() {} }, sessionStorage: { getItem: () => null, removeItem() {} },
  setInterval() {}, Node: El, console,
};
ctx.Node = El;
vm.createContext(ctx);
vm.runInContext(fs.readFileSync(process.argv.at(-1), "utf8"), ctx);
const text = (e) => e.text !== undefined ? e.text
  : `<${e.className || e.tag}>` + e.children.map(text).join("") + "</>";
const call = JSON.parse(fs.readFileSync(0, "utf8"));
console.log(text(vm.runInContext("blockView", ctx)({ kind: "tool_call", call_id: call.id }, call)));
"""


def render(record: CallRecord) -> str:
    call = to_plain(display_call(record))  # as the stream and the API send it
    out = subprocess.run(
        [NODE or "node", "-e", HARNESS, str(APP_JS)],
        input=json.dumps(call),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout


def test_an_edited_approval_shows_the_models_arguments_beside_the_edited_ones() -> None:
    record = CallRecord(
        id="m1.c1",
        name="refund",
        arguments='{"amount_cents": 2500}',
        status="succeeded",
        result="refunded",
        decision=CallDecision(
            approve=True,
            arguments='{"amount_cents": 2500}',
            original_arguments='{"amount_cents": 4999}',
        ),
    )
    shown = render(record)
    assert "approved with edits" in shown
    assert '<original><muted>model\'s arguments</><pre>{\n  "amount_cents": 4999\n}</></>' in shown
    assert (
        '<ran><muted>edited: the call runs with</><pre>{\n  "amount_cents": 2500\n}</></>' in shown
    )


def test_a_plain_approval_shows_the_arguments_once() -> None:
    record = CallRecord(
        id="m1.c1",
        name="refund",
        arguments='{"amount_cents": 4999}',
        status="succeeded",
        decision=CallDecision(approve=True),
    )
    shown = render(record)
    assert "<muted>approved</>" in shown and "original" not in shown
    assert shown.count("4999") == 1
