// Building elements and showing values: the helpers every part of the page uses.

export const $ = (id) => document.getElementById(id);

// h("li", {class: "x", onclick: f}, child, ...): an element; null/false children are skipped.
export function h(tag, attrs, ...children) {
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

export function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

// Times are shown in UTC, as the API writes them: the same for every reader of a run.
export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toISOString().slice(0, 19).replace("T", " ") + " UTC";
}

export function clock(iso) {
  return iso ? when(iso).slice(11, 19) : "";
}

export function took(start, end) {
  if (!start || !end) return "";
  const ms = new Date(end) - new Date(start);
  if (!(ms >= 0)) return "";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
}

export function tokens(u) {
  if (!u) return "";
  return `${u.input_tokens || 0} in · ${u.output_tokens || 0} out`;
}

// An inline result line under a form: "Sent." or the API's message.
export function note(el, text, ok) {
  el.className = ok ? "msg muted" : "msg error";
  el.textContent = text || "";
}
