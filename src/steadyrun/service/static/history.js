// The run's steps (safe points) and forking from one of them.

import { api, runPath } from "./api.js";
import { $, h } from "./dom.js";

let shownRun = null;
let forked = () => {};
export function onForked(fn) { forked = fn; }

async function loadHistory(runId) {
  const list = $("history");
  const { steps } = await api(`${runPath(runId)}/history`);
  if (shownRun !== runId) return;
  list.replaceChildren(...steps.map((s) => stepView(runId, s)));
  if (!steps.length) list.replaceChildren(h("li", { class: "muted" }, "No steps listed."));
}

// What a step added: each message in a line (its text, the calls it asks for, the results).
function addedView(s) {
  if (s.rewrote) return h("ul", { class: "added" }, h("li", { class: "muted" },
    `the context was rewritten (${s.messages.length} messages)`));
  return h("ul", { class: "added" }, s.messages.map((m) => {
    const calls = m.tool_calls.map((c) => `${c.name}(${c.arguments})`);
    const results = m.tool_results.map((r) => r.content);
    const said = [m.text, ...calls, ...results].filter(Boolean).join(" · ");
    return h("li", {}, h("span", { class: "role" }, `${m.role}: `), said.length > 300 ? said.slice(0, 300) + "…" : said);
  }));
}

function stepView(runId, s) {
  const msg = h("p", { class: "msg error" });
  const id = h("input", { "aria-label": "new run id", value: `${runId}-from-${s.step}` });
  const last = s.messages.length ? s.messages[s.messages.length - 1] : null;
  const editable = last && (last.role === "user" || last.role === "assistant");
  const edit = editable ? h("textarea", { "aria-label": "replacement",
    placeholder: `Optional: replace the ${last.role === "user" ? "input" : "model's response"} with this text` }) : null;
  const go = h("button", { class: "fork-go", onclick: async () => {
    go.disabled = true;
    const body = { at: s.step, new_run_id: id.value.trim() };
    if (edit && edit.value.trim()) body.edit = { text: edit.value };
    try {
      const made = await api(`${runPath(runId)}/fork`, { method: "POST", body });
      forked(made.run_id);
    } catch (err) {
      msg.textContent = err.message;
      go.disabled = false;
    }
  } }, "Fork");
  const form = h("div", { class: "fork-form", hidden: true },
    h("div", { class: "field" }, h("label", {}, "New run id"), id),
    edit ? h("div", { class: "field" }, edit) : null,
    h("div", { class: "actions" }, go), msg);
  const open = h("button", { class: "secondary fork", onclick: () => { form.hidden = !form.hidden; } },
    "Fork from here");
  const from = s.forked_from ? h("span", { class: "muted" }, `forked from ${s.forked_from.run_id} at step ${s.forked_from.step}`) : null;
  return h("li", { "data-step": s.step },
    h("div", { class: "head" }, h("span", { class: "n" }, `Step ${s.step}`),
      h("span", { class: `badge ${s.status}` }, s.status), h("span", { class: "muted" }, `next: ${s.phase}`),
      from, open),
    addedView(s), form);
}

export function resetHistory(runId) {
  shownRun = runId;
  $("history").hidden = true;
  $("history").replaceChildren();
  $("history-load").textContent = "Show steps";
}

export function wireHistory() {
  $("history-load").addEventListener("click", async () => {
    const list = $("history");
    if (!shownRun) return;
    if (!list.hidden) { resetHistory(shownRun); return; }
    list.hidden = false;
    $("history-load").textContent = "Hide steps";
    try { await loadHistory(shownRun); } catch (err) { list.replaceChildren(h("li", { class: "error" }, err.message)); }
  });
}
