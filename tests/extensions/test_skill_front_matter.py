"""Skill front matter: YAML read by the safe loader, and what it refuses, with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun.extensions.skills import Skills


def write_skill_file(root: Path, content: str) -> Path:
    folder = root / "guide"
    folder.mkdir()
    (folder / "SKILL.md").write_text(content)
    return folder


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("no front matter", "must start with front matter"),
        ("---\nname: guide\ndescription: d\nbody", "no closing '---'"),
        ("---\ndescription: d\n---\nbody", "non-empty string 'name'"),
        ("---\nname: guide\n---\nbody", "non-empty string 'description'"),
        ("---\nname: guide\ndescription: ''\n---\nbody", "non-empty string 'description'"),
        ("---\nname: true\ndescription: d\n---\nbody", "non-empty string 'name'"),
        ("---\nname: Guide\ndescription: d\n---\nbody", "lowercase letters"),
        ("---\nname: gu_ide\ndescription: d\n---\nbody", "lowercase letters"),
        ("---\nname: -guide\ndescription: d\n---\nbody", "lowercase letters"),
        ("---\nname: other\ndescription: d\n---\nbody", "must be the name of its folder"),
        (
            "---\nname: guide\nname: guide\ndescription: d\n---\nbody",
            "line 3: 'name' is given twice",
        ),
        ("---\nname: guide\ndescription: d\ncontext: inline\n---\nbody", "context must be 'fork'"),
        ("---\nname: guide\ndescription: d\n---\n\n  \n", "no instructions"),
        ("---\nname: guide\ndescription: [a, b]\n---\nbody", "non-empty string 'description'"),
        ('---\nname: guide\ndescription: "open\n---\nbody', "line 3: while scanning a quoted"),
        ("---\nname: guide\ndescription: 'a' b\n---\nbody", "line 3: .*expected <block end>"),
        ('---\nname: guide\ndescription: "\\q"\n---\nbody', "unknown escape character 'q'"),
        ("---\nname: guide\ndescription: d\n  extra: x\n---\nbody", "line 4: mapping values"),
        ("---\nname: guide\ndescription: d\nmeta:\n\t a: b\n---\nbody", "line 5: .*any token"),
        ("---\nname: guide\ndescription: d\njust words\n---\nbody", "line 4: .*expected ':'"),
        ("---\n- name: guide\n---\nbody", "must be 'key: value' lines"),
        ("---\nname: guide\ndescription: d\ntrue: x\n---\nbody", "key True must be a string"),
        ("---\nname: guide\ndescription: " + "d" * 1025 + "\n---\nbody", "over 1024"),
    ],
)
def test_bad_skill_files_are_refused_with_clear_errors(
    tmp_path: Path, content: str, error: str
) -> None:
    write_skill_file(tmp_path, content)
    with pytest.raises(sr.UsageError, match=error):
        Skills(tmp_path)


def test_front_matter_the_old_subset_refused_is_read_as_yaml(tmp_path: Path) -> None:
    # Lists, block values, deeper nesting, flow collections, anchors and empty values: the
    # hand-written subset refused each of these; YAML's safe loader reads them.
    front = "\n".join(
        [
            "name: guide",
            "description: >",
            "  Folded over",
            "  two lines.",
            "allowed-tools:",
            "  - read_skill",
            "  - search",
            "notes: |",
            "  line one",
            "  line two",
            "metadata:",
            "  owner: &team support",
            "  nested:",
            "    deeper: {a: 1, b: [x, y]}",
            "  backup: *team",
            "  empty:",
            "version: 1.0",
            "released: 2024-05-01",
            "legacy: yes",
        ]
    )
    skill = Skills(write_skill_file(tmp_path, f"---\n{front}\n---\nBody.")).skills["guide"]
    assert skill.description == "Folded over two lines."
    assert skill.metadata == {
        "allowed-tools": ["read_skill", "search"],
        "notes": "line one\nline two\n",
        "metadata": {
            "owner": "support",
            "nested": {"deeper": {"a": "1", "b": ["x", "y"]}},
            "backup": "support",
            "empty": None,
        },
        # Plain values stay strings (the Agent Skills convention), not YAML 1.1 floats, dates
        # or yes/no booleans.
        "version": "1.0",
        "released": "2024-05-01",
        "legacy": "yes",
    }


@pytest.mark.parametrize(
    "value",
    [
        "!!python/object/apply:os.system ['touch pwned']",
        "!!python/name:os.system",
        "!!python/object:pathlib.Path {}",
        "!!python/module:os",
    ],
)
def test_unsafe_yaml_tags_are_refused(tmp_path: Path, value: str) -> None:
    write_skill_file(tmp_path, f"---\nname: guide\ndescription: d\nextra: {value}\n---\nBody.")
    with pytest.raises(sr.UsageError, match="line 4: could not determine a constructor"):
        Skills(tmp_path)
    assert not (tmp_path / "pwned").exists()
    assert not Path("pwned").exists()
