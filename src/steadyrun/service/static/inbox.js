// The inbox: everything waiting for a person across runs (GET /inbox), with filters.

import { api } from "./api.js";
import { $, clock, h } from "./dom.js";

const LABEL = { decision: "approval", input: "question", result: "awaited result", review: "needs review",
  submission: "submitted", detached: "detached", task_input: "task question" };

let open = null;
export function onOpenItem(fn) { open = fn; }

export async function loadInbox() {
  const q = new URLSearchParams({ limit: "50" });
  const kind = $("inbox-kind").value;
  if (kind) q.set("kind", kind);
  const { items } = await api(`/inbox?${q}`);
  $("inbox-count").textContent = items.length ? String(items.length) : "";
  $("inbox").replaceChildren(...items.map((i) =>
    h("li", { "data-run": i.run_id, "data-call": i.item.call_id, class: `inbox-item ${i.item.kind}`,
      onclick: () => open && open(i.run_id) },
      h("div", { class: "row between" },
        h("span", { class: `badge ${i.item.kind === "review" ? "needs_review" : "waiting"}` }, LABEL[i.item.kind] || i.item.kind),
        h("span", { class: "muted small" }, clock(i.updated_at))),
      h("div", { class: "what" }, i.item.prompt || `${i.item.name}`),
      h("div", { class: "agent" }, `${i.run_id} · ${i.agent}`))));
  if (!items.length) $("inbox").replaceChildren(h("li", { class: "muted" }, "Nothing waits for you."));
}

export function wireInbox() {
  $("inbox-kind").addEventListener("change", () => loadInbox().catch(() => {}));
}
