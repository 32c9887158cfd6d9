// The steadyrun console: sign in, the inbox and the run list, and one run's live page.
// Plain ES modules, no build step. The token stays in sessionStorage (this tab only).

import { TOKEN_KEY, api, onUnauthorized, onWrite, token } from "./api.js";
import { $ } from "./dom.js";
import { renderActions, renderQueued, resetActions, wireActions } from "./actions.js";
import { onForked, resetHistory, wireHistory } from "./history.js";
import { loadInbox, onOpenItem, wireInbox } from "./inbox.js";
import { renderPending, resetPending } from "./pending.js";
import {
  loadAgents, loadReviewFlags, loadRuns, markRun, onOpen, pollRuns, selectRun, wireRuns,
} from "./runs.js";
import { follow } from "./stream.js";
import { renderTasks, resetTasks } from "./tasks.js";
import { renderTimeline } from "./timeline.js";

// The run list's first page is cheap; the inbox and the review flags scan runs' pending work.
const POLL_MS = 3000;
const SCAN_MS = 10000;
let current = null; // {runId, snapshot, lastId, abort, frame}

const hooks = {
  active: (run) => current === run,
  changed: (run) => scheduleRender(run),
  conn: (text) => { $("conn").textContent = text; },
  unauthorized: () => signOut("The token was not accepted."),
};

// Many deltas may arrive within one frame (a model writing fast, a catch-up after a
// reconnect): the page is drawn once per frame, with what they add up to.
function scheduleRender(run) {
  if (run.frame) return;
  run.frame = requestAnimationFrame(() => {
    run.frame = 0;
    if (current !== run || !run.snapshot) return;
    render(run.snapshot);
    markRun(run.snapshot.run_id, run.snapshot.status);
  });
}

function render(s) {
  $("empty").hidden = true;
  $("run").hidden = false;
  $("run-title").textContent = s.run_id;
  const status = $("run-status");
  status.textContent = s.status;
  status.className = `badge ${s.status}`;
  const u = s.usage || {};
  const review = s.calls.filter((c) => c.status === "needs_review");
  const n = u.requests || 0;
  const meta = [`agent ${s.agent}`, `${n} model call${n === 1 ? "" : "s"}`,
    `${u.input_tokens || 0} tokens in · ${u.output_tokens || 0} out`];
  if (s.status === "cancelled" && s.cancelled_by) meta.push(`cancelled by ${s.cancelled_by}`);
  $("run-meta").textContent = meta.join(" · ");
  $("review-flag").hidden = review.length === 0;
  $("review-flag").textContent = review.length
    ? `${review.length} call${review.length > 1 ? "s" : ""} need${review.length > 1 ? "" : "s"} review: ${review.map((c) => c.name).join(", ")}` : "";
  const calls = Object.fromEntries(s.calls.map((c) => [c.id, c]));
  renderTimeline(s.run_id, s.blocks, calls);
  renderQueued(s);
  const final = $("final");
  const said = s.blocks.filter((b) => b.kind === "content").map((b) => b.text);
  final.hidden = !(s.error || (s.text && said[said.length - 1] !== s.text));
  final.textContent = s.error ? `Failed: ${s.error}` : s.text || "";
  final.className = s.error ? "final error" : "final";
  renderPending(s);
  renderTasks(s);
  renderActions(s);
}

function openRun(runId) {
  if (current) current.abort.abort();
  current = null;
  resetPending();
  resetTasks();
  if (!runId) { $("run").hidden = true; $("empty").hidden = false; return; }
  current = { runId, snapshot: null, lastId: null, abort: new AbortController(), frame: 0 };
  resetHistory(runId);
  resetActions();
  selectRun(runId);
  follow(current, hooks);
}

const go = (runId) => { location.hash = `run=${encodeURIComponent(runId)}`; };

function route() {
  const m = location.hash.match(/run=([^&]+)/);
  const runId = m ? decodeURIComponent(m[1]) : null;
  if (!current || current.runId !== runId) openRun(runId);
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  if (current) current.abort.abort();
  current = null;
  $("main").hidden = true;
  $("logout").hidden = true;
  $("who").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("conn").textContent = "";
}

async function signIn() {
  // Everything the first view needs at once: who, the agents, the lists.
  const lists = Promise.all([loadAgents(), loadRuns().then(loadReviewFlags), loadInbox()]).catch(() => {});
  let who;
  try { who = await api("/whoami"); } catch (err) { if (token()) signOut(err.message); return; }
  $("login").hidden = true;
  $("main").hidden = false;
  $("logout").hidden = false;
  $("who").hidden = false;
  $("who").textContent = `signed in as ${who.principal}`;
  route();
  await lists;
}

onUnauthorized(signOut);
// A write changes what waits and how runs stand: the lists follow a moment later (the run
// itself follows its stream).
let refreshing = 0;
onWrite(() => {
  clearTimeout(refreshing);
  refreshing = setTimeout(scan, 400);
});
onOpen(go);
onOpenItem(go);
onForked(async (runId) => { await loadRuns().catch(() => {}); go(runId); });
wireRuns();
wireInbox();
wireActions();
wireHistory();
$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  $("token").value = "";
  signIn();
});
$("logout").addEventListener("click", () => signOut());
$("refresh").addEventListener("click", () => { loadRuns().then(loadReviewFlags).catch(() => {}); loadInbox().catch(() => {}); });
window.addEventListener("hashchange", route);
// The lists are polled (their first page, cheaply); the open run follows its stream.
const signedIn = () => token() && !$("main").hidden;
function scan() {
  pollRuns();
  loadInbox().catch(() => {});
  loadReviewFlags().catch(() => {});
}
setInterval(() => { if (signedIn()) pollRuns(); }, POLL_MS);
setInterval(() => { if (signedIn()) { loadInbox().catch(() => {}); loadReviewFlags().catch(() => {}); } }, SCAN_MS);
if (token()) signIn(); else signOut();
