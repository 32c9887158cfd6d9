"""Skill folders on disk: the ``SKILL.md`` front matter parser, ``Skill``, and resource reads.

Everything here is synchronous file work: it runs at construction (or ``Skills.reload``) and,
for resource reads during a run, in a worker thread.

The front matter is a small, strict subset of YAML: ``key: value`` lines, where a value is a
plain string, a quoted string (``"..."`` with JSON escapes, or ``'...'`` with ``''`` for a
quote) or a boolean (``true``/``false``); a key with no value opens one level of indented
``key: value`` lines (``metadata:`` in the Agent Skills convention). Blank lines and ``#``
comments are skipped. Anything else (lists, block scalars, deeper nesting) is refused with the
line it is on.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from steadyrun._errors import UsageError
from steadyrun.runtime._texts import Texts, default_texts

__all__ = [
    "SKILL_FILE",
    "Skill",
    "load_skill_folder",
    "load_skills",
    "parse_skill_file",
    "read_resource",
]

SKILL_FILE = "SKILL.md"
NAME_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):(?:\s+(.*))?$")
_KNOWN = ("name", "description", "context")

Scalar = str | bool


@dataclass(kw_only=True, frozen=True)
class Skill:
    """A parsed skill folder.

    Attributes:
        name: The skill's name (lowercase letters, digits and single hyphens; at most 64
            characters; the same as its folder's name).
        description: What the skill does and when to use it, as the model reads it.
        body: The instructions: ``SKILL.md`` after its front matter.
        path: The skill's folder.
        forked: Whether the skill runs in a sub-agent (``context: fork``).
        resources: The other files of the folder, as paths relative to it (``/``-separated,
            sorted; hidden files and ``__pycache__`` left out).
        metadata: Front matter keys other than ``name``, ``description`` and ``context``.
    """

    name: str
    description: str
    body: str
    path: Path
    forked: bool = False
    resources: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)


# -- front matter --------------------------------------------------------------------------


def parse_skill_file(text: str, source: str) -> tuple[dict[str, Any], str]:
    """Split ``SKILL.md`` text into its front matter (parsed) and its body.

    Args:
        text: The file's text.
        source: Names the file in error messages.

    Returns:
        The front matter keys and values, and the body with surrounding blank lines removed.

    Raises:
        UsageError: The front matter is missing, unterminated, or not in the supported subset.
    """
    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != "---":
        raise UsageError(f"{source}: must start with front matter between '---' lines")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise UsageError(f"{source}: the front matter has no closing '---' line")
    front = _parse_block(lines[1:end], source, first_line=2)
    body = "\n".join(lines[end + 1 :]).strip("\n")
    return front, body


def _parse_block(lines: list[str], source: str, *, first_line: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    open_key: str | None = None  # a key with no value: indented lines below it are its map
    for number, line in enumerate(lines, start=first_line):
        where = f"{source}, line {number}"
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise UsageError(f"{where}: indent with spaces, not tabs")
        indented = line[0] == " "
        key, raw = _key_value(stripped, where)
        if indented:
            if open_key is None:
                raise UsageError(f"{where}: unexpected indentation (only one level, under a key)")
            target = out[open_key]
            if raw is None:
                raise UsageError(f"{where}: nesting deeper than one level is not supported")
        else:
            open_key = None
            target = out
            if raw is None:
                out[key] = {}
                open_key = key
                continue
        if key in target:
            raise UsageError(f"{where}: {key!r} is given twice")
        target[key] = _scalar(raw, where)
    for key, value in out.items():
        if value == {}:
            raise UsageError(f"{source}: {key!r} has no value")
    return out


def _key_value(stripped: str, where: str) -> tuple[str, str | None]:
    if stripped.startswith("- ") or stripped == "-":
        raise UsageError(f"{where}: lists are not supported; write the value on one line")
    match = _KEY.match(stripped)
    if match is None:
        raise UsageError(f"{where}: expected 'key: value', got {stripped[:60]!r}")
    raw = (match.group(2) or "").strip()
    return match.group(1), raw if raw and not raw.startswith("#") else None


def _scalar(raw: str, where: str) -> Scalar:
    if raw[0] == '"':
        end = _closing_double_quote(raw)
        if end is None:
            raise UsageError(f"{where}: unterminated quoted string")
        _only_comment_after(raw[end + 1 :], where)
        try:
            value: str = json.loads(raw[: end + 1])
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: bad escape in quoted string ({exc.msg})") from None
        return value
    if raw[0] == "'":
        i = 1
        chars: list[str] = []
        while i < len(raw):
            if raw[i] == "'":
                if raw[i + 1 : i + 2] == "'":
                    chars.append("'")
                    i += 2
                    continue
                _only_comment_after(raw[i + 1 :], where)
                return "".join(chars)
            chars.append(raw[i])
            i += 1
        raise UsageError(f"{where}: unterminated quoted string")
    if raw[0] in "|>":
        raise UsageError(f"{where}: block values ('|', '>') are not supported; use one line")
    if raw[0] in "[{&*!%@`":
        raise UsageError(f"{where}: a value starting with {raw[0]!r} must be quoted")
    value = re.split(r"\s+#", raw, maxsplit=1)[0].strip()
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def _closing_double_quote(raw: str) -> int | None:
    i = 1
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
            continue
        if raw[i] == '"':
            return i
        i += 1
    return None


def _only_comment_after(rest: str, where: str) -> None:
    rest = rest.strip()
    if rest and not rest.startswith("#"):
        raise UsageError(f"{where}: unexpected text after the quoted string: {rest[:40]!r}")


# -- folders -------------------------------------------------------------------------------


def load_skill_folder(folder: Path, *, max_body_chars: int) -> Skill:
    """Read and check one skill folder.

    Args:
        folder: The folder holding ``SKILL.md``.
        max_body_chars: The longest body allowed.

    Returns:
        The skill.

    Raises:
        UsageError: ``SKILL.md`` is missing or invalid.
    """
    file = folder / SKILL_FILE
    if not file.is_file():
        raise UsageError(f"skill folder {folder} has no {SKILL_FILE}")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{file}: not UTF-8 text") from None
    front, body = parse_skill_file(text, str(file))
    name, description = front.pop("name", None), front.pop("description", None)
    for key, value in (("name", name), ("description", description)):
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"{file}: the front matter needs a non-empty string {key!r}")
    assert isinstance(name, str) and isinstance(description, str)
    if len(name) > MAX_NAME_CHARS or not NAME_PATTERN.match(name):
        raise UsageError(
            f"{file}: name {name!r} must be lowercase letters, digits and single hyphens "
            f"(no leading or trailing hyphen), at most {MAX_NAME_CHARS} characters"
        )
    if name != folder.name:
        raise UsageError(f"{file}: name {name!r} must be the name of its folder ({folder.name!r})")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise UsageError(f"{file}: description is over {MAX_DESCRIPTION_CHARS} characters")
    context = front.pop("context", None)
    if context not in (None, "fork"):
        raise UsageError(f"{file}: context must be 'fork' (or left out), got {context!r}")
    if not body.strip():
        raise UsageError(f"{file}: no instructions after the front matter")
    if len(body) > max_body_chars:
        raise UsageError(
            f"{file}: the instructions are {len(body)} characters, over the limit of "
            f"{max_body_chars} (max_body_chars); move details into resource files"
        )
    return Skill(
        name=name,
        description=description.strip(),
        body=body,
        path=folder,
        forked=context == "fork",
        resources=_resources(folder),
        metadata=front,
    )


def load_skills(folders: Iterable[Path], *, max_body_chars: int) -> dict[str, Skill]:
    """Read every skill of some folders, by name.

    A folder holding ``SKILL.md`` is one skill; any other folder holds skills, one per
    sub-folder (hidden ones skipped).

    Args:
        folders: The folders.
        max_body_chars: The longest body allowed.

    Returns:
        The skills by name, sorted by name.

    Raises:
        UsageError: A folder is missing, holds no skill, or a skill is invalid or named twice.
    """
    found: dict[str, Skill] = {}
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"skills folder {folder} does not exist or is not a folder")
        if (folder / SKILL_FILE).exists():
            candidates = [folder]
        else:
            candidates = sorted(p for p in folder.iterdir() if p.is_dir() and not _hidden(p.name))
            if not candidates:
                raise UsageError(f"skills folder {folder} holds no skill folders")
        for candidate in candidates:
            skill = load_skill_folder(candidate, max_body_chars=max_body_chars)
            other = found.get(skill.name)
            if other is not None:
                raise UsageError(
                    f"two skills are named {skill.name!r}: {other.path} and {skill.path}"
                )
            found[skill.name] = skill
    return dict(sorted(found.items()))


def _hidden(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


def _resources(folder: Path) -> tuple[str, ...]:
    root = folder.resolve()
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):  # symlinked folders are not entered
        dirnames[:] = [d for d in dirnames if not _hidden(d)]
        for filename in filenames:
            path = Path(dirpath, filename)
            relative = path.relative_to(folder).as_posix()
            if _hidden(filename) or relative == SKILL_FILE:
                continue
            target = path.resolve()
            if target.is_relative_to(root) and target.is_file():
                out.append(relative)
    return tuple(sorted(out))


# -- resources -----------------------------------------------------------------------------


def read_resource(skill: Skill, path: str, *, max_bytes: int, texts: Texts | None = None) -> str:
    """The text of one resource file of a skill (blocking: run it in a worker thread).

    Args:
        skill: The skill.
        path: The file, relative to the skill's folder.
        max_bytes: The largest file that may be read.
        texts: The texts of the errors (``skill_resource_*``; default: English).

    Returns:
        The file's text.

    Raises:
        ValueError: The path is not one of the skill's resources, leads outside its folder,
            is too large or not UTF-8 text; the message is written for the model.
    """
    texts = texts or default_texts()
    wanted = path.strip()
    if not wanted:
        raise ValueError(texts.skill_resource_no_path)
    if PurePosixPath(wanted).is_absolute() or PureWindowsPath(wanted).anchor:
        raise ValueError(texts.skill_resource_absolute.format(path=path))
    parts = PurePosixPath(wanted.replace("\\", "/")).parts
    if ".." in parts:
        raise ValueError(texts.skill_resource_up.format(path=path))
    relative = PurePosixPath(*parts).as_posix() if parts else ""
    if relative not in skill.resources:
        listed = ", ".join(skill.resources) or texts.skill_resources_none
        raise ValueError(
            texts.skill_resource_unknown.format(name=skill.name, path=path, resources=listed)
        )
    root = skill.path.resolve()
    target = (skill.path / relative).resolve()
    if not target.is_relative_to(root):  # replaced by a link since the folder was read
        raise ValueError(texts.skill_resource_outside.format(path=path))
    try:
        with target.open("rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as exc:
        error = str(exc.strerror or exc)
        raise ValueError(texts.skill_resource_unreadable.format(path=path, error=error)) from None
    if len(data) > max_bytes:
        raise ValueError(texts.skill_resource_too_large.format(path=path, max_bytes=str(max_bytes)))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(texts.skill_resource_not_text.format(path=path)) from None
