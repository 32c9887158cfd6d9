// The run's timeline: input, model text and thinking, calls with their audit trail.

import { $, clock, h, pretty, took, tokens, when } from "./dom.js";

// The timeline keeps each block's element while the block lives: text that grows (the
// model's words as they are written) is extended in place, nothing else is redrawn, and the
// reader's scroll stays where it was (or follows the end when the reader was at the end).
const drawn = new Map(); // block id -> {key, el, text}
let drawnRun = null;

export function renderTimeline(runId, blocks, calls) {
  const list = $("timeline");
  if (drawnRun !== runId) { drawn.clear(); drawnRun = runId; }
  const atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  const seen = new Set();
  const els = blocks.map((b) => {
    seen.add(b.id);
    const call = calls[b.call_id];
    const key = JSON.stringify([b.kind, b.live, b.name, b.call_id, call || null, b.at, b.by, b.usage]);
    const was = drawn.get(b.id);
    if (was && was.key === key && b.kind !== "tool_call") {
      const text = was.el.querySelector(".text") || was.el;
      if (text.textContent !== b.text) text.textContent = b.text;
      return was.el;
    }
    if (was && was.key === key && was.text === b.text) return was.el;
    const el = blockView(b, call);
    drawn.set(b.id, { key, el, text: b.text });
    return el;
  });
  for (const id of [...drawn.keys()]) if (!seen.has(id)) drawn.delete(id);
  const same = els.length === list.children.length && els.every((el, i) => list.children[i] === el);
  if (!same) list.replaceChildren(...els);
  if (atEnd && blocks.some((b) => b.live)) window.scrollTo(0, document.body.scrollHeight);
}

// A model block's line above its text (kept in an attribute: the text itself stays the
// model's words only): when, which model call, and that call's usage on its first block.
function modelMeta(b) {
  const parts = [clock(b.at), b.model_call_id ? `model call ${b.model_call_id}` : ""];
  if (b.usage) parts.push(`${tokens(b.usage)} tokens`);
  return parts.filter(Boolean).join(" · ") || null;
}

export function blockView(b, call) {
  if (b.kind === "input") return inputBlock(b);
  if (b.live && b.kind === "tool_call") {
    return h("li", { class: "tool_call live", "data-block": b.id },
      h("div", { class: "tool" }, h("span", { class: "name" }, b.name || "tool call"),
        h("span", { class: "badge running" }, "writing")),
      h("pre", { class: "text" }, b.text));
  }
  if (b.kind !== "tool_call") {
    return h("li", { class: b.live ? `${b.kind} live` : b.kind, "data-block": b.id,
      "data-meta": b.live ? "writing…" : modelMeta(b) },
      h("span", { class: "text" }, b.text));
  }
  if (!call) return h("li", { class: "tool_call" }, "tool call");
  return callView(call, b);
}

function inputBlock(b) {
  const who = b.role === "system" ? "notice" : b.by ? `message from ${b.by}` : "message";
  return h("li", { class: `input ${b.role || "user"}`, "data-block": b.id, "data-message": b.message_id,
    "data-meta": [who, when(b.at)].filter(Boolean).join(" · ") },
    h("span", { class: "text" }, b.text));
}

export function callView(call, b) {
  const out = call.error || call.result;
  const d = call.decision;
  // A call a person checked after it needed review has no known end: its completion time is
  // when they recorded the outcome (the trail below says so).
  const checked = call.settled_by && !call.handover;
  const duration = checked ? "" : took(call.started_at, call.completed_at);
  const ended = !checked && call.completed_at ? `ended ${clock(call.completed_at)}` : "";
  const times = [call.started_at ? `started ${clock(call.started_at)}` : "",
    duration ? `took ${duration}` : ended].filter(Boolean);
  return h("li", { class: `tool_call${call.status === "needs_review" ? " review" : ""}`, "data-call": call.id,
    "data-meta": b && b.usage ? modelMeta(b) : null },
    h("div", { class: "tool" },
      h("span", { class: "name" }, call.name),
      h("span", { class: `badge ${call.status}` }, call.status.replace(/_/g, " ")),
      d ? decisionWord(d, call.status) : null,
      times.length ? h("span", { class: "times muted small" }, times.join(" · ")) : null),
    d && d.edited ? editedView(d) : h("pre", {}, pretty(call.arguments)),
    d ? decisionTrail(d, call.prompt) : null,
    call.input ? askedView(call.input) : null,
    out ? h("pre", { class: call.error ? "error" : "" }, out) : null,
    call.status === "needs_review" ? h("p", { class: "flag review" },
      "Needs review: the call may or may not have taken effect. Check, then acknowledge it.") : null,
    call.settled_by ? settledTrail(call) : null);
}

// Who recorded the outcome of a call the host settled. A call the runtime ran itself
// (no handover) is settled by a person only after it needed review.
function settledTrail(call) {
  const at = call.completed_at ? ` at ${when(call.completed_at)}` : "";
  const what = call.handover ? "outcome recorded" : "needed review: checked, outcome recorded";
  return h("p", { class: "trail small" }, `${what} by ${call.settled_by}${at}`);
}

// The decision in a word; a rejected call's status badge already says "rejected".
function decisionWord(d, status) {
  if (!d.approve) return status === "rejected" ? null : h("span", { class: "muted" }, "rejected");
  return h("span", { class: "muted" }, d.edited ? "approved with edits" : "approved");
}

function decisionTrail(d, prompt) {
  const what = d.approve ? (d.edited ? "approved with edits" : "approved") : "rejected";
  const bits = [what, d.decided_by ? `by ${d.decided_by}` : "", d.decided_at ? `at ${when(d.decided_at)}` : ""];
  return h("p", { class: "trail small" },
    prompt ? h("span", { class: "asked-approval" }, h("span", { class: "muted" }, "asked: "), `${prompt} — `) : null,
    bits.filter(Boolean).join(" "),
    d.reason ? h("span", { class: "reason" }, ` — “${d.reason}”`) : null);
}

// An input request, kept after it was answered: the question, its schema, the answer.
function askedView(r) {
  return h("div", { class: "asked" },
    h("div", {}, h("span", { class: "muted" }, "asked: "), r.prompt),
    r.response_schema ? h("details", {}, h("summary", { class: "muted small" }, "answer schema"),
      h("pre", {}, JSON.stringify(r.response_schema, null, 2))) : null,
    r.answered ? h("div", { class: "answer" }, h("span", { class: "muted" }, "answer: "),
      h("code", {}, JSON.stringify(r.response)),
      r.answered_by ? h("span", { class: "muted" }, ` by ${r.answered_by}`) : null,
      r.answered_at ? h("span", { class: "muted" }, ` at ${when(r.answered_at)}`) : null)
      : h("div", { class: "muted" }, "not answered yet"));
}

// A reviewer's edit: the model's arguments beside the ones the call runs with.
export function editedView(d) {
  return h("div", { class: "edited" },
    h("div", { class: "original" }, h("div", { class: "muted" }, "model's arguments"),
      h("pre", {}, pretty(d.original_arguments || ""))),
    h("div", { class: "ran" }, h("div", { class: "muted" }, "edited: the call runs with"),
      h("pre", {}, pretty(d.arguments || ""))));
}
