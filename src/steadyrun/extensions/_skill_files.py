"""Skill folders on disk: the ``SKILL.md`` front matter parser, ``Skill``, and resource reads.

Everything here is synchronous file work: it runs at construction (or ``Skills.reload``) and,
for resource reads during a run, in a worker thread.

The front matter is YAML, read by PyYAML's safe loader (``_FrontMatterLoader``): a key given
twice is refused, and plain values are strings, booleans or null, never numbers or dates.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import yaml

from steadyrun._errors import UsageError
from steadyrun._texts import Texts, default_texts

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


class _FrontMatterLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice.

    Plain values are typed only as ``true``/``false`` (any of the three YAML cases) and
    ``null``: the Agent Skills convention reads front matter values as strings, so
    ``version: 1.0`` stays ``"1.0"`` (not a float) and ``2024-05-01`` a string (not a date).
    Tags that build Python objects are refused by the safe constructor.
    """

    # Only the resolvers added below type plain values (the safe loader's would add YAML 1.1's
    # numbers, dates and yes/no/on/off booleans).
    yaml_implicit_resolvers = {}  # noqa: RUF012 - PyYAML's own class attribute

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # PyYAML keeps the last of two equal keys; two values for one key is a mistake to show.
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"{key_node.value!r} is given twice", key_node.start_mark
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


_FrontMatterLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)
_FrontMatterLoader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
_FrontMatterLoader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


def parse_skill_file(text: str, source: str) -> tuple[dict[str, Any], str]:
    """Split ``SKILL.md`` text into its front matter (parsed) and its body.

    Args:
        text: The file's text.
        source: Names the file in error messages.

    Returns:
        The front matter keys and values, and the body with surrounding blank lines removed.

    Raises:
        UsageError: The front matter is missing, unterminated, not YAML, uses a tag the safe
            loader refuses, gives a key twice, or is not a mapping with string keys.
    """
    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != "---":
        raise UsageError(f"{source}: must start with front matter between '---' lines")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise UsageError(f"{source}: the front matter has no closing '---' line")
    try:
        front = yaml.load("\n".join(lines[1:end]), Loader=_FrontMatterLoader)
    except yaml.MarkedYAMLError as exc:
        # The front matter starts on the file's second line; marks count from 0.
        where = f"{source}, line {exc.problem_mark.line + 2}" if exc.problem_mark else source
        problem = f"{exc.context}, {exc.problem}" if exc.context else str(exc.problem)
        if isinstance(exc, yaml.constructor.ConstructorError):
            problem += " (read by YAML's safe loader: no tags that make Python objects)"
        raise UsageError(f"{where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{source}: the front matter is not valid YAML ({exc})") from None
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise UsageError(f"{source}: the front matter must be 'key: value' lines")
    for key in front:
        if not isinstance(key, str):
            raise UsageError(f"{source}: front matter key {key!r} must be a string")
    body = "\n".join(lines[end + 1 :]).strip("\n")
    return front, body


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
