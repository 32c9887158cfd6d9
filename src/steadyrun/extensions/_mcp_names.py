"""Names of MCP tools as steadyrun tools: valid, deterministic and collision-free.

The rule, for each MCP tool name ``name`` of one server with prefix ``prefix``:

1. The full name is ``prefix + "_" + name`` (just ``name`` when the prefix is empty).
2. A full name that is a valid tool name (``validate_tool_name``: letters, digits, ``_`` and
   ``-``, starting with a letter or ``_``, at most 64 characters) is kept as it is.
3. Any other full name has every other character replaced by ``_`` (and a ``_`` put in front
   when it does not start with a letter or ``_``), is cut to 55 characters and gets ``_`` and
   the first 8 hex digits of the SHA-256 of the full name: ``files.read`` of server ``fs``
   becomes ``fs_files_read_<hash>``. The hash keeps ``files.read`` and ``files_read`` apart.
4. Collisions (with a name taken already, or between two tools) are settled in a fixed order:
   kept names first, then by full name; a later name that is taken gets the hash of
   ``full name + "#" + n`` for the first ``n = 1, 2, ...`` that is free.

The result depends only on the set of names, the prefix and the taken names, never on the
order in which the server listed its tools, so a resumed run finds its tools under the same
names.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable

from steadyrun.tools import MAX_TOOL_NAME_LENGTH, validate_tool_name

__all__ = ["HASH_LENGTH", "mcp_tool_names"]

HASH_LENGTH = 8
"""Hex digits of SHA-256 appended to a name that had to be changed."""

_BAD_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_BASE_LENGTH = MAX_TOOL_NAME_LENGTH - HASH_LENGTH - 1


def mcp_tool_names(
    names: Iterable[str], *, prefix: str = "", taken: Collection[str] = ()
) -> dict[str, str]:
    """Give each MCP tool name of one server a valid, unique steadyrun tool name.

    Args:
        names: The tool names as the server lists them (duplicates count once).
        prefix: Put before each name with ``_``; empty for none.
        taken: Names already used by other tools; none of the results is one of them.

    Returns:
        The steadyrun name of each MCP name: always valid, distinct for distinct MCP names, and
        independent of the order of ``names``.
    """
    fulls = {name: f"{prefix}_{name}" if prefix else name for name in set(names)}
    # Names kept as they are come first, so a changed name never pushes a valid one aside.
    order = sorted(fulls, key=lambda name: (bool(validate_tool_name(fulls[name])), fulls[name]))
    used = set(taken)
    result: dict[str, str] = {}
    for name in order:
        full = fulls[name]
        candidate = full if not validate_tool_name(full) else _shortened(full, full)
        attempt = 0
        while candidate in used:
            attempt += 1
            candidate = _shortened(full, f"{full}#{attempt}")
        used.add(candidate)
        result[name] = candidate
    return result


def _shortened(full: str, hashed: str) -> str:
    base = _BAD_CHAR.sub("_", full)
    if not base or not (base[0].isalpha() or base[0] == "_"):
        base = "_" + base
    digest = hashlib.sha256(hashed.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_LENGTH]
    return f"{base[:_BASE_LENGTH]}_{digest}"
