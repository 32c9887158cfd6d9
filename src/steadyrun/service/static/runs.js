// The run list (filters, search by id, paging by cursor, refreshed by a cheap poll of its
// first page) and starting a run.

import { api } from "./api.js";
import { $, clock, h, note, when } from "./dom.js";

const state = { cursor: null, pages: 0, selected: null, review: new Set(), open: null };

export function onOpen(fn) { state.open = fn; }

function query(cursor) {
  const q = new URLSearchParams({ limit: "25" });
  const status = $("f-status").value, agent = $("f-agent").value, search = $("f-search").value.trim();
  const since = Number($("f-since").value);
  if (status) q.set("status", status);
  if (agent) q.set("agent", agent);
  if (search) q.set("id_prefix", search);
  if (since) q.set("updated_after", new Date(Date.now() - since * 3600 * 1000).toISOString());
  if (cursor) q.set("cursor", cursor);
  return `/runs?${q}`;
}

function runItem(r) {
  const flagged = state.review.has(r.run_id);
  return h("li", { "data-run": r.run_id, class: state.selected === r.run_id ? "selected" : "",
    onclick: () => state.open && state.open(r.run_id) },
    h("div", { class: "who" }, h("div", { class: "id" }, r.run_id),
      h("div", { class: "agent", title: `updated ${when(r.updated_at)}` }, `${r.agent} · ${clock(r.updated_at)}`)),
    h("div", { class: "flags" },
      flagged ? h("span", { class: "badge needs_review flag-review", title: "a call needs review" }, "review") : null,
      h("span", { class: `badge ${r.status}` }, r.status)));
}

// The first page again: what the poll and every filter change do.
export async function loadRuns() {
  const page = await api(query(null));
  state.cursor = page.next_cursor;
  state.pages = 1;
  $("runs").replaceChildren(...page.runs.map(runItem));
  if (!page.runs.length) $("runs").replaceChildren(h("li", { class: "muted" }, "No runs match."));
  $("more").hidden = !state.cursor;
}

async function loadMore() {
  if (!state.cursor) return;
  const page = await api(query(state.cursor));
  state.cursor = page.next_cursor;
  state.pages += 1;
  $("runs").append(...page.runs.map(runItem));
  $("more").hidden = !state.cursor;
}

// Which runs have a call that needs review: an inbox scan, so fetched less often than the
// list (and after each write); the flags are redrawn in place.
export async function loadReviewFlags() {
  const { items } = await api("/inbox?kind=review&limit=200");
  state.review = new Set(items.map((i) => i.run_id));
  document.querySelectorAll("#runs li[data-run]").forEach((li) => {
    const flag = li.querySelector(".flag-review");
    if (state.review.has(li.dataset.run) && !flag) {
      li.querySelector(".flags").prepend(h("span", { class: "badge needs_review flag-review", title: "a call needs review" }, "review"));
    } else if (!state.review.has(li.dataset.run) && flag) {
      flag.remove();
    }
  });
}

// Only the first page is polled: a reader paging back keeps what they loaded.
export function pollRuns() {
  if (state.pages <= 1) loadRuns().catch(() => {});
}

export function selectRun(runId) {
  state.selected = runId;
  document.querySelectorAll("#runs li").forEach((li) => li.classList.toggle("selected", li.dataset.run === runId));
}

export function markRun(runId, status) {
  const li = document.querySelector(`#runs li[data-run="${CSS.escape(runId)}"]`);
  if (!li) return;
  const badge = li.querySelector(".badge:last-child");
  badge.textContent = status;
  badge.className = `badge ${status}`;
}

export async function loadAgents() {
  const { agents } = await api("/agents");
  const keep = $("f-agent").value;
  $("f-agent").replaceChildren(h("option", { value: "" }, "any agent"), ...agents.map((a) => h("option", { value: a }, a)));
  $("f-agent").value = keep;
  $("start-agent").replaceChildren(...agents.map((a) => h("option", { value: a }, a)));
  $("start-go").disabled = agents.length === 0;
}

export function wireRuns() {
  for (const id of ["f-status", "f-agent", "f-since"]) $(id).addEventListener("change", () => loadRuns().catch(() => {}));
  let typing = 0;
  $("f-search").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => loadRuns().catch(() => {}), 250);
  });
  $("more").addEventListener("click", () => loadMore().catch(() => {}));
  $("start-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { agent: $("start-agent").value, input: $("start-input").value.trim() };
    const runId = $("start-id").value.trim();
    if (runId) body.run_id = runId;
    if (!body.input) { note($("start-msg"), "Write the run's input first."); return; }
    $("start-go").disabled = true;
    try {
      const started = await api("/runs", { method: "POST", body });
      note($("start-msg"), started.created ? `Started ${started.run_id}.` : `${started.run_id} was started before.`, true);
      $("start-input").value = "";
      $("start-id").value = "";
      await loadRuns().catch(() => {});
      if (state.open) state.open(started.run_id);
    } catch (err) {
      note($("start-msg"), err.message, false);
    } finally {
      $("start-go").disabled = false;
    }
  });
}
