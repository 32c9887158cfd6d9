// "Waiting for you" on the run page: decisions, input requests, awaited results,
// needs-review calls and calls the host owns, each with its form.

import { api, runPath } from "./api.js";
import { $, h, note, pretty } from "./dom.js";
import { fieldFor } from "./forms.js";

// Each item's form is kept while the item stays the same, so a half-filled form survives
// the other items coming and going.
let shown = new Map(); // JSON of [run id, item] -> element
let shownKey = null;

export function resetPending() { shown = new Map(); shownKey = null; }

export function renderPending(s) {
  const open = s.pending.filter((p) => p.kind !== "task_input");
  const key = JSON.stringify([s.run_id, open]);
  if (shownKey === key) return;
  shownKey = key;
  $("pending-box").hidden = open.length === 0;
  const next = new Map();
  const els = open.map((p) => {
    const k = JSON.stringify([s.run_id, p]);
    const el = shown.get(k) || (p.kind === "decision" ? decisionView(s, p)
      : p.kind === "input" ? inputView(s, p) : settleView(s, p));
    next.set(k, el);
    return el;
  });
  shown = next;
  $("pending").replaceChildren(...els);
}

// Sends body to path with the buttons disabled meanwhile; the outcome goes in msg.
async function send(path, body, buttons, msg) {
  buttons.forEach((b) => (b.disabled = true));
  try {
    await api(path, { method: "POST", body });
    note(msg, "Sent.", true);
  } catch (err) {
    note(msg, err.message, false);
    buttons.forEach((b) => (b.disabled = false));
  }
}

function decisionView(s, p) {
  const msg = h("p", { class: "msg error" });
  const reason = h("input", { placeholder: "Reason (shown to the agent)", "aria-label": "reason" });
  const args = h("textarea", { "aria-label": "arguments", hidden: true }, pretty(p.arguments));
  const path = `${runPath(s.run_id)}/calls/${encodeURIComponent(p.call_id)}/decision`;
  const approve = h("button", { class: "approve", onclick: () => {
    const body = { approve: true };
    if (!args.hidden) {
      try { body.arguments = JSON.parse(args.value); } catch { note(msg, "The arguments are not valid JSON."); return; }
    }
    if (reason.value) body.reason = reason.value;
    send(path, body, [approve, reject, edit], msg);
  } }, "Approve");
  const reject = h("button", { class: "danger reject", onclick: () => {
    send(path, { approve: false, reason: reason.value || "rejected on the web page" }, [approve, reject, edit], msg);
  } }, "Reject");
  const edit = h("button", { class: "secondary edit", onclick: () => {
    args.hidden = !args.hidden;
    edit.textContent = args.hidden ? "Edit arguments" : "Keep original arguments";
    approve.textContent = args.hidden ? "Approve" : "Approve with edits";
  } }, "Edit arguments");
  return h("div", { class: "item decision", "data-call": p.call_id },
    h("div", { class: "prompt" }, p.prompt || `Run ${p.name}?`),
    h("div", { class: "tool" }, h("span", { class: "name" }, p.name), h("span", { class: "badge" }, "approval")),
    h("pre", {}, pretty(p.arguments)),
    args,
    h("div", { class: "field" }, reason),
    h("div", { class: "actions" }, approve, reject, edit),
    msg);
}

function inputView(s, p) {
  const msg = h("p", { class: "msg error" });
  const form = fieldFor(p.response_schema, "answer", true);
  const path = `${runPath(s.run_id)}/waits/${encodeURIComponent(p.wait_id)}/answer`;
  const submit = h("button", { class: "answer", onclick: () =>
    send(path, { response: form.read() ?? null }, [submit], msg) }, "Answer");
  return h("div", { class: "item input", "data-call": p.call_id },
    h("div", { class: "prompt" }, p.prompt || `${p.name} asks for input`),
    form.el, h("div", { class: "actions" }, submit), msg);
}

const SETTLE_TEXT = {
  result: ["awaits a result from outside", "Record result", "Record error"],
  review: ["needs review: it may or may not have taken effect", "It took effect", "It did not"],
  submission: ["was submitted to the host", "Record result", "Record error"],
  detached: ["runs outside while the run goes on", "Record result", "Record error"],
};

// Settling a call the host owns: an awaited result (the run waits), a needs-review call
// (acknowledged: what the person found), a submitted or detached call.
function settleView(s, p) {
  const [what, ok, bad] = SETTLE_TEXT[p.kind] || SETTLE_TEXT.result;
  const msg = h("p", { class: "msg error" });
  const text = h("textarea", { "aria-label": "outcome", oninput: () => note(msg, ""),
    placeholder: p.kind === "review" ? "What you found (the agent may see it)" : "The result (JSON or text)" });
  const path = `${runPath(s.run_id)}/calls/${encodeURIComponent(p.call_id)}/settle`;
  const outcome = (field) => {
    const v = text.value.trim() || (p.kind === "review" ? "checked by a person" : "");
    if (!v) { note(msg, "Write the outcome first."); return; }
    send(path, { [field]: v }, [good, fail], msg);
  };
  const good = h("button", { class: "settle-result", onclick: () => outcome("result") }, ok);
  const fail = h("button", { class: "secondary settle-error", onclick: () => outcome("error") }, bad);
  return h("div", { class: `item ${p.kind}`, "data-call": p.call_id },
    h("div", { class: "prompt" }, `${p.name} ${what}`),
    h("div", { class: "tool" }, h("span", { class: "name" }, p.name),
      h("span", { class: `badge ${p.kind === "review" ? "needs_review" : "waiting"}` }, p.kind),
      p.blocking ? h("span", { class: "muted small" }, "the run waits for it") : null),
    h("pre", {}, pretty(p.arguments)),
    p.payload != null ? h("div", { class: "payload" }, h("div", { class: "muted small" }, "handed over with"),
      h("pre", {}, JSON.stringify(p.payload, null, 2))) : null,
    h("div", { class: "field" }, text),
    h("div", { class: "actions" }, good, fail), msg);
}
