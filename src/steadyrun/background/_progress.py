"""Progress of a task: recent updates formatted for the model, and updates written to a file.

The file gets each update once per event id, in order.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from steadyrun.background._model import Task, Update

__all__ = ["Materializer", "render_progress"]

_MAX_SHOWN = 2000


def render_progress(task: Task, updates: list[Update]) -> str:
    """The task's status and its recent updates, as the model reads them."""
    lines = [f"task {task.id} ({task.description}): {task.status}"]
    if task.status == "waiting_input" and task.input is not None:
        lines.append(f"waiting for input: {task.input.prompt}")
    if task.error:
        lines.append(f"error: {task.error}")
    if not updates:
        lines.append("no progress updates yet")
    for u in updates:
        data = u.data if len(u.data) <= _MAX_SHOWN else u.data[:_MAX_SHOWN] + " [...]"
        lines.append(f"[{u.kind}] {data}")
    return "\n".join(lines)


class Materializer:
    """Writes each task's updates to ``<folder>/<task id>.jsonl``, deduplicated by event id.

    The file itself is the record of what was written (its event ids are read back on first
    use), so a worker that recovers a task and replays its updates adds none twice.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._seen: dict[str, set[str]] = {}
        self._lock = asyncio.Lock()

    def path(self, task_id: str) -> Path:
        """The file of a task (the same path every time)."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)
        return self.folder / f"{safe}.jsonl"

    async def append(self, task_id: str, update: Update) -> bool:
        """Append one update unless its event id is in the file already."""
        async with self._lock:
            return await asyncio.to_thread(self._append, task_id, update)

    def _append(self, task_id: str, update: Update) -> bool:
        path = self.path(task_id)
        seen = self._seen.get(task_id)
        if seen is None:
            seen = set()
            if path.exists():
                for line in path.read_text().splitlines():
                    try:
                        seen.add(json.loads(line)["event_id"])
                    except (ValueError, KeyError):
                        continue  # a line torn by a crash: its event is written again
            self._seen[task_id] = seen
        if update.event_id in seen:
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        record = {"event_id": update.event_id, "kind": update.kind, "data": update.data}
        if update.metadata:
            record["metadata"] = update.metadata  # type: ignore[assignment]
        with path.open("a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
        seen.add(update.event_id)
        return True
