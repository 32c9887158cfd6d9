// The run's own actions: send a message (or continue a completed run), resume, cancel.
// Each reports the API's answer inline, next to its button.

import { api, runPath } from "./api.js";
import { $, clock, h, note } from "./dom.js";

let runId = null;
const current = () => runId;
// Messages sent from this page that the run has not taken yet, by run: shown after the
// timeline until an input block with their id appears.
const sent = new Map(); // run id -> [{id, text, by, at}]

export function renderQueued(s) {
  const taken = new Set(s.blocks.filter((b) => b.kind === "input").map((b) => b.message_id));
  const waiting = (sent.get(s.run_id) || []).filter((m) => !taken.has(m.id));
  sent.set(s.run_id, waiting);
  $("queued").replaceChildren(...waiting.map((m) => h("li", { class: "input queued", "data-message": m.id,
    "data-meta": `message from ${m.by} · sent ${clock(m.at)} · the run takes it at its next safe point` },
    h("span", { class: "text" }, m.text))));
}

let last = null; // the snapshot last drawn

export function renderActions(s) {
  runId = s.run_id;
  last = s;
  const ended = s.status === "cancelled";
  $("resume").hidden = s.status !== "failed";
  $("cancel").hidden = ["completed", "cancelled"].includes(s.status);
  $("message-box").hidden = ended;
  $("message-title").textContent = s.status === "completed" ? "Continue the run" : "Send a message";
  $("message-send").textContent = s.status === "completed" ? "Continue" : "Send";
  $("message-hint").textContent = s.status === "completed"
    ? "The run answers it in a new turn."
    : "The run takes it at its next safe point (steering it).";
}

export function resetActions() {
  delete $("cancel").dataset.armed;
  $("cancel").textContent = "Cancel run";
  note($("action-msg"), "", true);
  note($("message-msg"), "", true);
  note($("resume-msg"), "", true);
  $("message-text").value = "";
}

async function act(button, msgEl, path, body, done) {
  const run = current();
  if (!run) return;
  button.disabled = true;
  try {
    const out = await api(`${runPath(run)}${path}`, { method: "POST", body });
    note(msgEl, done(out), true);
  } catch (err) {
    note(msgEl, err.message, false);
  } finally {
    button.disabled = false;
  }
}

export function wireActions() {
  $("resume").addEventListener("click", () =>
    act($("resume"), $("resume-msg"), "/resume", undefined, () => "Resumed: a worker continues the run."));
  // Two clicks: the first asks (a page dialog would block the stream's drawing).
  $("cancel").addEventListener("click", () => {
    const button = $("cancel");
    if (!button.dataset.armed) {
      button.dataset.armed = "1";
      button.textContent = "Really cancel?";
      note($("action-msg"), "Its open calls are cancelled; click again to cancel the run.", true);
      return;
    }
    delete button.dataset.armed;
    button.textContent = "Cancel run";
    act(button, $("action-msg"), "/cancel", undefined, (out) => `Cancelled by ${out.by || "you"}.`);
  });
  $("message-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("message-text").value.trim();
    if (!text) { note($("message-msg"), "Write a message first."); return; }
    // An id per message: a retry of the same send is not added twice.
    const id = `web-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    const run = current();
    act($("message-send"), $("message-msg"), "/messages", { text, id }, (out) => {
      $("message-text").value = "";
      const mine = { id, text, by: out.by || "you", at: new Date().toISOString() };
      sent.set(run, [...(sent.get(run) || []), mine]);
      if (last && last.run_id === run) renderQueued(last);
      return `Sent by ${out.by || "you"}.`;
    });
  });
}
