"""The page's rendering of a call, in Node with a minimal DOM (no browser needed).

The browser test drives the whole page in Chromium; this one checks what a tool call block
shows, from the JSON the stream sends, wherever Node is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import steadyrun
from steadyrun._codec import to_plain
from steadyrun.chat import Usage
from steadyrun.records import CallDecision, CallRecord, InputRequest
from steadyrun.stream import DisplayBlock, display_call

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js")
STATIC = Path(steadyrun.__file__).parent / "service" / "static"

# Just enough DOM for the page's modules to build elements; text() flattens an element.
# The modules are copied beside a package.json that makes Node read them as ES modules.
HARNESS = r"""
class El {
  constructor(tag) { this.tag = tag; this.children = []; this.attrs = {}; this.className = ""; }
  append(...cs) { this.children.push(...cs); }
  replaceChildren(...cs) { this.children = cs; }
  setAttribute(k, v) { this.attrs[k] = v; }
  addEventListener() {}
}
globalThis.Node = El;
globalThis.document = { createElement: (t) => new El(t), createTextNode: (t) => ({ text: t }),
                        getElementById: () => new El("div") };
const text = (e) => e.text !== undefined ? e.text
  : `<${e.className || e.tag}>` + e.children.map(text).join("") + "</>";
const { blockView } = await import(process.argv.at(-1));
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const el = input.block ? blockView(input.block, input.call)
  : blockView({ kind: "tool_call", call_id: input.id }, input);
const meta = el.attrs["data-meta"] || null;
console.log(JSON.stringify({ text: text(el), meta, cls: el.className }));
"""


def _run(value: object, tmp: Path) -> dict[str, str]:
    for js in STATIC.glob("*.js"):
        shutil.copy(js, tmp / js.name)
    (tmp / "package.json").write_text('{"type": "module"}')
    script = tmp / "harness.cjs"
    # A CommonJS script (require, stdin) that imports the page's module by its file URL.
    by_url = "await import(require('url').pathToFileURL(process.argv.at(-1)).href)"
    body = HARNESS.replace("await import(process.argv.at(-1))", by_url)
    script.write_text("(async () => {" + body + "})();")
    out = subprocess.run(
        [NODE or "node", str(script), str(tmp / "timeline.js")],
        input=json.dumps(value),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def render(record: CallRecord, tmp: Path) -> str:
    call = to_plain(display_call(record))  # as the stream and the API send it
    return _run(call, tmp)["text"]


def test_an_edited_approval_shows_the_models_arguments_beside_the_edited_ones(
    tmp_path: Path,
) -> None:
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
    shown = render(record, tmp_path)
    assert "approved with edits" in shown
    assert '<original><muted>model\'s arguments</><pre>{\n  "amount_cents": 4999\n}</></>' in shown
    assert (
        '<ran><muted>edited: the call runs with</><pre>{\n  "amount_cents": 2500\n}</></>' in shown
    )


def test_a_plain_approval_shows_the_arguments_once(tmp_path: Path) -> None:
    record = CallRecord(
        id="m1.c1",
        name="refund",
        arguments='{"amount_cents": 4999}',
        status="succeeded",
        decision=CallDecision(approve=True),
    )
    shown = render(record, tmp_path)
    assert "<muted>approved</>" in shown and "original" not in shown
    assert shown.count("4999") == 1


T0 = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)


def test_a_rejected_call_says_rejected_once_with_who_when_and_why(tmp_path: Path) -> None:
    record = CallRecord(
        id="m1.c2",
        name="refund",
        arguments='{"amount_cents": 700}',
        status="rejected",
        error="rejected: too much",
        decision=CallDecision(approve=False, reason="too much", decided_by="bob", decided_at=T0),
        notes={"steadyrun.confirm_prompt": "Refund 700 cents?"},
    )
    shown = render(record, tmp_path)
    assert "<muted>asked: </>Refund 700 cents? — </>rejected by bob" in shown
    assert shown.count(">rejected") == 3  # the badge, the trail, the error the model saw
    assert "<badge rejected>rejected</>" in shown
    assert "<muted>rejected</>" not in shown  # not "rejected rejected"
    assert "rejected by bob at 2026-12-01 09:00:00 UTC" in shown and "too much" in shown


def test_an_answered_question_keeps_its_prompt_and_answer(tmp_path: Path) -> None:
    record = CallRecord(
        id="m1.c3",
        name="ask",
        status="succeeded",
        result="answer visa",
        started_at=T0,
        completed_at=T0 + timedelta(seconds=2, milliseconds=500),
        input_request=InputRequest(
            wait_id="w1",
            prompt="Which card?",
            response_schema={"type": "object"},
            response={"card": "visa"},
            answered_by="carol",
            answered_at=T0 + timedelta(seconds=1),
        ),
    )
    shown = render(record, tmp_path)
    assert "asked: </>Which card?" in shown
    answer = '<answer><muted>answer: </><code>{"card":"visa"}</><muted> by carol</>'
    assert answer + "<muted> at 2026-12-01 09:00:01 UTC</></>" in shown
    assert "started 09:00:00 · took 2.5 s" in shown


def test_a_settled_and_a_needs_review_call_show_who_and_the_flag(tmp_path: Path) -> None:
    settled = CallRecord(
        id="m1.c4",
        name="bank",
        status="succeeded",
        result="bank ok",
        completed_at=T0,
        handover="await",
        settled_by="dave",
    )
    assert "outcome recorded by dave at 2026-12-01 09:00:00 UTC" in render(settled, tmp_path)
    review = CallRecord(id="m1.c5", name="ship", status="needs_review", result="unknown")
    out = _run(to_plain(display_call(review)), tmp_path)
    assert "Needs review" in out["text"] and "review" in out["cls"]
    checked = CallRecord(id="m1.c5", name="ship", status="succeeded", settled_by="erin")
    assert "needed review: checked, outcome recorded by erin" in render(checked, tmp_path)


def test_input_and_model_blocks_show_who_when_and_usage_beside_the_text(tmp_path: Path) -> None:
    steer = DisplayBlock(
        id="in3", kind="input", position=4, text="Be quick.", role="user", by="bob", at=T0
    )
    out = _run({"block": to_plain(steer), "call": None}, tmp_path)
    assert out["text"] == "<input user><text>Be quick.</></>"  # the text alone: meta beside
    assert out["meta"] == "message from bob · 2026-12-01 09:00:00 UTC"
    said = DisplayBlock(
        id="m2.b1",
        kind="content",
        position=5,
        text="Done.",
        model_call_id="m2",
        at=T0,
        usage=Usage(requests=1, input_tokens=120, output_tokens=8),
    )
    out = _run({"block": to_plain(said), "call": None}, tmp_path)
    assert out["text"] == "<content><text>Done.</></>"
    assert out["meta"] == "09:00:00 · model call m2 · 120 in · 8 out tokens"
