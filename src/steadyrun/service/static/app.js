// The steadyrun page: runs, a run's live timeline, and what waits for a person.
// Plain JS, no build step. The token stays in sessionStorage (this tab only); the stream is
// read with fetch (so the token goes in a header) and resumed with Last-Event-ID.
"use strict";

const TOKEN_KEY = "steadyrun.token";
const $ = (id) => document.getElementById(id);
let current = null; // {runId, snapshot, lastId, abort, pendingKey}

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// -- the API ------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
  }
}

async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY)}` };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body !== undefined ? JSON.stringify(options.body) : undefined,
  });
  const body = await res.json().catch(() => null);
  if (res.status === 401) signOut("The token was not accepted.");
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

function unwrap(doc) {
  if (!doc || doc.format !== 1) throw new Error("unknown document format");
  return doc.data;
}

// -- display snapshots and deltas (the same rules as steadyrun.stream.apply) --------------

function putBlock(blocks, block) {
  const kept = blocks.filter((b) => b.id !== block.id);
  const key = (b) => [b.position, b.id];
  const less = (a, b) => key(a)[0] < key(b)[0] || (key(a)[0] === key(b)[0] && key(a)[1] < key(b)[1]);
  let at = kept.findIndex((b) => !less(b, block));
  if (at < 0) at = kept.length;
  kept.splice(at, 0, block);
  return kept;
}

const FRAGMENTS = new Set(["text_fragment", "thinking_fragment", "arguments_fragment"]);

function apply(s, d) {
  // A joined fragment (sent to a follower that lagged) covers first_seq..seq.
  const first = FRAGMENTS.has(d.kind) && d.first_seq != null ? d.first_seq : d.seq;
  if (first !== s.seq + 1 || first > d.seq) throw new Error("gap");
  s = { ...s, seq: d.seq };
  switch (d.kind) {
    case "run_status": return { ...s, status: d.status, text: d.text, error: d.error };
    case "block_added": case "block_updated": return { ...s, blocks: putBlock(s.blocks, d.block) };
    case "block_removed": return { ...s, blocks: s.blocks.filter((b) => b.id !== d.block_id) };
    case "text_fragment": case "thinking_fragment": case "arguments_fragment":
      return { ...s, blocks: s.blocks.map((b) => (b.id === d.block_id ? { ...b, text: b.text + d.text } : b)) };
    case "call_status": {
      const known = s.calls.some((c) => c.id === d.call.id);
      return { ...s, calls: known ? s.calls.map((c) => (c.id === d.call.id ? d.call : c)) : [...s.calls, d.call] };
    }
    case "call_removed": return { ...s, calls: s.calls.filter((c) => c.id !== d.call_id) };
    case "plan": return { ...s, plan: d.plan };
    case "usage": return { ...s, usage: d.usage };
    case "pending": return { ...s, pending: d.items };
    default: return s;
  }
}

// -- the stream ---------------------------------------------------------------------------

async function follow(run) {
  while (current === run) {
    try {
      const headers = { Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY)}` };
      if (run.lastId) headers["Last-Event-ID"] = run.lastId;
      const res = await fetch(`/runs/${encodeURIComponent(run.runId)}/stream`, {
        headers, signal: run.abort.signal,
      });
      if (res.status === 401) return signOut("The token was not accepted.");
      if (!res.ok) throw new Error(`stream: HTTP ${res.status}`);
      setConn("live");
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          onEvent(run, buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
        }
      }
    } catch (err) {
      if (run.abort.signal.aborted) return;
    }
    setConn("reconnecting…");
    await new Promise((r) => setTimeout(r, 1500));
  }
}

function onEvent(run, chunk) {
  let event = "message", id = null, data = "";
  for (const line of chunk.split("\n")) {
    if (line.startsWith(":")) continue;
    const at = line.indexOf(":");
    const field = at < 0 ? line : line.slice(0, at);
    const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "id") id = value;
    else if (field === "data") data += value;
  }
  if (!data || current !== run) return;
  const payload = unwrap(JSON.parse(data));
  try {
    if (event === "snapshot") run.snapshot = payload;
    else if (event === "delta" && run.snapshot) run.snapshot = apply(run.snapshot, payload);
    else return;
  } catch (err) {
    run.lastId = null; // out of step: start over from a snapshot
    run.abort.abort();
    return;
  }
  if (id) run.lastId = id;
  scheduleRender(run);
}

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

// -- rendering ----------------------------------------------------------------------------

function setConn(text) { $("conn").textContent = text; }

function render(s) {
  $("empty").hidden = true;
  $("run").hidden = false;
  $("run-title").textContent = s.run_id;
  const status = $("run-status");
  status.textContent = s.status;
  status.className = `badge ${s.status}`;
  const u = s.usage || {};
  $("run-meta").textContent =
    `agent ${s.agent} · ${u.requests || 0} model calls · ${(u.input_tokens || 0) + (u.output_tokens || 0)} tokens`;
  const calls = Object.fromEntries(s.calls.map((c) => [c.id, c]));
  renderTimeline(s.run_id, s.blocks, calls);
  const final = $("final");
  const said = s.blocks.filter((b) => b.kind === "content").map((b) => b.text);
  final.hidden = !(s.error || (s.text && said[said.length - 1] !== s.text));
  final.textContent = s.error ? `Failed: ${s.error}` : s.text || "";
  final.className = s.error ? "final error" : "final";
  renderPending(s);
}

// The timeline keeps each block's element while the block lives: text that grows (the
// model's words as they are written) is extended in place, nothing else is redrawn, and the
// reader's scroll stays where it was (or follows the end when the reader was at the end).
const drawn = new Map(); // block id -> {key, el, text}
let drawnRun = null;

function renderTimeline(runId, blocks, calls) {
  const list = $("timeline");
  if (drawnRun !== runId) { drawn.clear(); drawnRun = runId; }
  const atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  const seen = new Set();
  const els = blocks.map((b) => {
    seen.add(b.id);
    const call = calls[b.call_id];
    const key = JSON.stringify([b.kind, b.live, b.name, b.call_id, call || null]);
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

function blockView(b, call) {
  if (b.live && b.kind === "tool_call") {
    return h("li", { class: "tool_call live", "data-block": b.id },
      h("div", { class: "tool" }, h("span", { class: "name" }, b.name || "tool call"),
        h("span", { class: "badge running" }, "writing")),
      h("pre", { class: "text" }, b.text));
  }
  if (b.kind !== "tool_call") {
    return h("li", { class: b.live ? `${b.kind} live` : b.kind, "data-block": b.id },
      h("span", { class: "text" }, b.text));
  }
  if (!call) return h("li", { class: "tool_call" }, "tool call");
  const out = call.error || call.result;
  return h("li", { class: "tool_call", "data-call": call.id },
    h("div", { class: "tool" },
      h("span", { class: "name" }, call.name),
      h("span", { class: `badge ${call.status}` }, call.status.replace(/_/g, " ")),
      call.decision ? h("span", { class: "muted" },
        call.decision.approve ? (call.decision.edited ? "approved with edits" : "approved") : "rejected") : null),
    call.decision && call.decision.edited ? editedView(call.decision) : h("pre", {}, pretty(call.arguments)),
    out ? h("pre", { class: call.error ? "error" : "" }, out) : null);
}

// A reviewer's edit: the model's arguments beside the ones the call runs with.
function editedView(d) {
  return h("div", { class: "edited" },
    h("div", { class: "original" }, h("div", { class: "muted" }, "model's arguments"),
      h("pre", {}, pretty(d.original_arguments || ""))),
    h("div", { class: "ran" }, h("div", { class: "muted" }, "edited: the call runs with"),
      h("pre", {}, pretty(d.arguments || ""))));
}

function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

function renderPending(s) {
  const open = s.pending.filter((p) => p.kind === "decision" || p.kind === "input");
  const key = JSON.stringify(open);
  if (current.pendingKey === key) return; // keep half-filled forms
  current.pendingKey = key;
  $("pending-box").hidden = open.length === 0;
  $("pending").replaceChildren(...open.map((p) => (p.kind === "decision" ? decisionView(s, p) : inputView(s, p))));
}

function decisionView(s, p) {
  const msg = h("p", { class: "msg error" });
  const reason = h("input", { placeholder: "Reason (shown to the agent)", "aria-label": "reason" });
  const args = h("textarea", { "aria-label": "arguments", hidden: true }, pretty(p.arguments));
  const run = s.run_id;
  const send = async (body, buttons) => {
    buttons.forEach((b) => (b.disabled = true));
    try {
      await api(`/runs/${encodeURIComponent(run)}/calls/${encodeURIComponent(p.call_id)}/decision`, { method: "POST", body });
      msg.textContent = "";
      msg.className = "msg muted";
      msg.textContent = "Sent.";
    } catch (err) {
      msg.className = "msg error";
      msg.textContent = err.message;
      buttons.forEach((b) => (b.disabled = false));
    }
  };
  const approve = h("button", { class: "approve", onclick: () => {
    const body = { approve: true, decided_by: "web page" };
    if (!args.hidden) {
      try { body.arguments = JSON.parse(args.value); } catch { msg.textContent = "The arguments are not valid JSON."; return; }
    }
    if (reason.value) body.reason = reason.value;
    send(body, [approve, reject, edit]);
  } }, "Approve");
  const reject = h("button", { class: "danger reject", onclick: () => {
    send({ approve: false, reason: reason.value || "rejected on the web page", decided_by: "web page" }, [approve, reject, edit]);
  } }, "Reject");
  const edit = h("button", { class: "secondary edit", onclick: () => {
    args.hidden = !args.hidden;
    edit.textContent = args.hidden ? "Edit arguments" : "Keep original arguments";
    approve.textContent = args.hidden ? "Approve" : "Approve with edits";
  } }, "Edit arguments");
  return h("div", { class: "item decision", "data-call": p.call_id },
    h("div", { class: "prompt" }, p.prompt || `Run ${p.name}?`),
    h("div", { class: "tool" }, h("span", { class: "name" }, p.name)),
    h("pre", {}, pretty(p.arguments)),
    args,
    h("div", { class: "field" }, reason),
    h("div", { class: "actions" }, approve, reject, edit),
    msg);
}

// A form from a JSON schema: string, number, integer, boolean, enum, objects with properties;
// anything else is a JSON text area.
function fieldFor(schema, label, required) {
  schema = schema || {};
  const title = h("label", {}, `${schema.title || label}${required ? " *" : ""}`);
  if (Array.isArray(schema.enum)) {
    const select = h("select", { "aria-label": label },
      required ? null : h("option", { value: "" }, "—"),
      schema.enum.map((v, i) => h("option", { value: String(i) }, String(v))));
    return { el: h("div", { class: "field" }, title, select),
      read: () => (select.value === "" ? undefined : schema.enum[Number(select.value)]) };
  }
  if (schema.type === "string") {
    const input = h("input", { "aria-label": label, placeholder: schema.description || "" });
    return { el: h("div", { class: "field" }, title, input),
      read: () => (input.value === "" && !required ? undefined : input.value) };
  }
  if (schema.type === "number" || schema.type === "integer") {
    const input = h("input", { type: "number", step: schema.type === "integer" ? "1" : "any", "aria-label": label });
    return { el: h("div", { class: "field" }, title, input), read: () => {
      if (input.value === "") return undefined;
      return schema.type === "integer" ? parseInt(input.value, 10) : Number(input.value);
    } };
  }
  if (schema.type === "boolean") {
    const box = h("input", { type: "checkbox", "aria-label": label });
    return { el: h("div", { class: "field check" }, h("label", {}, box, schema.title || label)), read: () => box.checked };
  }
  if (schema.type === "object" && schema.properties) {
    const need = new Set(schema.required || []);
    const parts = Object.entries(schema.properties).map(([k, sub]) => [k, fieldFor(sub, k, need.has(k))]);
    return { el: h("div", { class: "field" }, parts.map(([, f]) => f.el)), read: () => {
      const out = {};
      for (const [k, f] of parts) { const v = f.read(); if (v !== undefined) out[k] = v; }
      return out;
    } };
  }
  const area = h("textarea", { "aria-label": label, placeholder: "JSON" });
  return { el: h("div", { class: "field" }, title, area), read: () => {
    if (area.value.trim() === "") return undefined;
    try { return JSON.parse(area.value); } catch { return area.value; }
  } };
}

function inputView(s, p) {
  const msg = h("p", { class: "msg error" });
  const form = fieldFor(p.response_schema, "answer", true);
  const submit = h("button", { class: "answer", onclick: async () => {
    submit.disabled = true;
    try {
      await api(`/runs/${encodeURIComponent(s.run_id)}/waits/${encodeURIComponent(p.wait_id)}/answer`,
        { method: "POST", body: { response: form.read() ?? null } });
      msg.className = "msg muted";
      msg.textContent = "Sent.";
    } catch (err) {
      msg.className = "msg error";
      msg.textContent = err.message;
      submit.disabled = false;
    }
  } }, "Answer");
  return h("div", { class: "item input", "data-call": p.call_id },
    h("div", { class: "prompt" }, p.prompt || `${p.name} asks for input`),
    form.el, h("div", { class: "actions" }, submit), msg);
}

// -- steps and forks ----------------------------------------------------------------------

async function loadHistory(runId) {
  const list = $("history");
  const { steps } = await api(`/runs/${encodeURIComponent(runId)}/history`);
  if (!current || current.runId !== runId) return;
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
      const made = await api(`/runs/${encodeURIComponent(runId)}/fork`, { method: "POST", body });
      await loadRuns().catch(() => {});
      location.hash = `run=${encodeURIComponent(made.run_id)}`;
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

function resetHistory() {
  $("history").hidden = true;
  $("history").replaceChildren();
  $("history-load").textContent = "Show steps";
}

$("history-load").addEventListener("click", async () => {
  const list = $("history");
  if (!current) return;
  if (!list.hidden) { resetHistory(); return; }
  list.hidden = false;
  $("history-load").textContent = "Hide steps";
  try { await loadHistory(current.runId); } catch (err) { list.replaceChildren(h("li", { class: "error" }, err.message)); }
});

// -- runs ---------------------------------------------------------------------------------

async function loadRuns() {
  const { runs } = await api("/runs?limit=100");
  $("runs").replaceChildren(...runs.map((r) =>
    h("li", { "data-run": r.run_id, class: current && current.runId === r.run_id ? "selected" : "",
      onclick: () => { location.hash = `run=${encodeURIComponent(r.run_id)}`; } },
      h("div", {}, h("div", { class: "id" }, r.run_id), h("div", { class: "agent" }, r.agent)),
      h("span", { class: `badge ${r.status}` }, r.status))));
  if (!runs.length) $("runs").replaceChildren(h("li", { class: "muted" }, "No runs yet."));
}

function markRun(runId, status) {
  const li = document.querySelector(`#runs li[data-run="${CSS.escape(runId)}"]`);
  if (!li) return;
  const badge = li.querySelector(".badge");
  badge.textContent = status;
  badge.className = `badge ${status}`;
}

function openRun(runId) {
  if (current) current.abort.abort();
  current = null;
  if (!runId) { $("run").hidden = true; $("empty").hidden = false; return; }
  current = { runId, snapshot: null, lastId: null, abort: new AbortController(), pendingKey: null };
  resetHistory();
  document.querySelectorAll("#runs li").forEach((li) => li.classList.toggle("selected", li.dataset.run === runId));
  follow(current);
}

function route() {
  const m = location.hash.match(/run=([^&]+)/);
  openRun(m ? decodeURIComponent(m[1]) : null);
}

// -- sign in ------------------------------------------------------------------------------

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  if (current) current.abort.abort();
  current = null;
  $("main").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  setConn("");
}

async function signIn() {
  $("login").hidden = true;
  $("main").hidden = false;
  $("logout").hidden = false;
  try { await loadRuns(); } catch (err) { return; }
  route();
}

$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  $("token").value = "";
  signIn();
});
$("logout").addEventListener("click", () => signOut());
$("refresh").addEventListener("click", () => loadRuns());
window.addEventListener("hashchange", route);
setInterval(() => { if (sessionStorage.getItem(TOKEN_KEY)) loadRuns().catch(() => {}); }, 5000);
if (sessionStorage.getItem(TOKEN_KEY)) signIn(); else signOut();
