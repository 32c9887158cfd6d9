// A run's display stream: snapshots and deltas (the same rules as steadyrun.stream.apply),
// read with fetch (so the token goes in a header) and resumed with Last-Event-ID.

import { token, runPath, unwrap } from "./api.js";

export function putBlock(blocks, block) {
  const kept = blocks.filter((b) => b.id !== block.id);
  const less = (a, b) => a.position < b.position || (a.position === b.position && a.id < b.id);
  let at = kept.findIndex((b) => !less(b, block));
  if (at < 0) at = kept.length;
  kept.splice(at, 0, block);
  return kept;
}

const FRAGMENTS = new Set(["text_fragment", "thinking_fragment", "arguments_fragment"]);

export function apply(s, d) {
  // A joined fragment (sent to a follower that lagged) covers first_seq..seq.
  const first = FRAGMENTS.has(d.kind) && d.first_seq != null ? d.first_seq : d.seq;
  if (first !== s.seq + 1 || first > d.seq) throw new Error("gap");
  s = { ...s, seq: d.seq };
  switch (d.kind) {
    case "run_status":
      return { ...s, status: d.status, text: d.text, error: d.error, cancelled_by: d.cancelled_by };
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

// Follows run (an object {runId, snapshot, lastId, abort}) while hooks.active(run) holds;
// hooks.changed(run) after each event, hooks.conn(text) for the connection's state.
export async function follow(run, hooks) {
  while (hooks.active(run)) {
    try {
      const headers = { Authorization: `Bearer ${token()}` };
      if (run.lastId) headers["Last-Event-ID"] = run.lastId;
      const res = await fetch(`${runPath(run.runId)}/stream`, { headers, signal: run.abort.signal });
      if (res.status === 401) return hooks.unauthorized();
      if (!res.ok) throw new Error(`stream: HTTP ${res.status}`);
      hooks.conn("live");
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          onEvent(run, buffer.slice(0, cut), hooks);
          buffer = buffer.slice(cut + 2);
        }
      }
    } catch (err) {
      if (run.abort.signal.aborted) {
        if (!hooks.active(run)) return;
        run.abort = new AbortController(); // out of step: start over from a snapshot
      }
    }
    hooks.conn("reconnecting…");
    await new Promise((r) => setTimeout(r, 1500));
  }
}

function onEvent(run, chunk, hooks) {
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
  if (!data || !hooks.active(run)) return;
  const payload = unwrap(JSON.parse(data));
  try {
    if (event === "snapshot") run.snapshot = payload;
    else if (event === "delta" && run.snapshot) run.snapshot = apply(run.snapshot, payload);
    else return;
  } catch (err) {
    run.lastId = null;
    run.abort.abort();
    return;
  }
  if (id) run.lastId = id;
  hooks.changed(run);
}
