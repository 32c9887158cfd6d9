// The run's background tasks in one line on the run page (GET /runs/{id}/tasks, either engine).

import { api, runPath } from "./api.js";
import { $ } from "./dom.js";

// Tasks change without the run's display changing (progress, a question): the line is
// fetched when the run is drawn, at most every few seconds, never two requests at once.
const EVERY_MS = 3000;
let state = { runId: null, at: 0, busy: false };
let later = 0; // a fetch put off by the limit, so the last change is shown too

export function resetTasks() {
  clearTimeout(later);
  state = { runId: null, at: 0, busy: false };
  const line = $("tasks-line");
  line.hidden = true;
  line.textContent = "";
}

export async function renderTasks(s) {
  const now = Date.now();
  if (state.busy || (state.runId === s.run_id && now - state.at < EVERY_MS)) {
    clearTimeout(later);
    later = setTimeout(() => renderTasks(s), EVERY_MS);
    return;
  }
  state = { runId: s.run_id, at: now, busy: true };
  try {
    const { tasks } = await api(`${runPath(s.run_id)}/tasks`);
    if (state.runId !== s.run_id) return;
    const line = $("tasks-line");
    line.hidden = tasks.length === 0;
    line.textContent = tasks.length ? `Background tasks: ${tasks.map(taskText).join(" · ")}` : "";
  } catch {
    // The line is a convenience: the timeline and the inbox stay right without it.
  } finally {
    state.busy = false;
  }
}

function taskText(t) {
  const what = t.description || t.tool;
  const asks = t.question && !t.question.answered ? ` (asks: ${t.question.prompt})` : "";
  return `${what}: ${t.status.replace("_", " ")}${asks}`;
}
