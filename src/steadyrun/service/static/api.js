// The API: requests with the tab's token, and its typed errors.

export const TOKEN_KEY = "steadyrun.token";

export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.message || body.detail)) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error;
  }
}

let unauthorized = () => {};
export function onUnauthorized(fn) { unauthorized = fn; }
// Called after every write the page makes: the lists show its effect without waiting a poll.
let wrote = () => {};
export function onWrite(fn) { wrote = fn; }

export const token = () => sessionStorage.getItem(TOKEN_KEY);
export const runPath = (runId) => `/runs/${encodeURIComponent(runId)}`;

export async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${token()}` };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body !== undefined ? JSON.stringify(options.body) : undefined,
  });
  const body = await res.json().catch(() => null);
  if (res.status === 401) unauthorized("The token was not accepted.");
  if (!res.ok) throw new ApiError(res.status, body);
  if (options.method && options.method !== "GET") wrote();
  return body;
}

export function unwrap(doc) {
  if (!doc || doc.format !== 1) throw new Error("unknown document format");
  return doc.data;
}
