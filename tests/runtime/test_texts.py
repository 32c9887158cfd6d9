"""Model-facing texts: languages, field-by-field overrides, placeholder checks, docs.

Run this file as a script to regenerate the field table of docs/texts.md:
``.venv/bin/python tests/runtime/test_texts.py``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyrun as sr
from steadyrun._texts import LANGUAGES, PLACEHOLDERS, Texts
from steadyrun._texts_zh import CHINESE
from steadyrun.chat import ToolResultPart
from steadyrun.testing import ScriptedModel, text, tool_calls

SRC = Path(sr.__file__).parent
DOCS = SRC.parents[1] / "docs" / "texts.md"
START, END = "<!-- fields:start -->", "<!-- fields:end -->"

# Fields not formatted by the runtime yet (none: every sentence is wired in).
NOT_WIRED_YET: frozenset[str] = frozenset()
# Chinese texts made of placeholders and punctuation only.
NO_WORDS = {"interrupted_detail", "rejected_reason", "args_separator"}
CJK = re.compile(r"[\u4e00-\u9fff]")


def dummies(field: str) -> dict[str, str]:
    return {name: f"<{name}>" for name in PLACEHOLDERS[field]}


def names_in(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}


# -- the built-in languages ----------------------------------------------------------------


def test_every_field_has_a_chinese_text_with_the_same_placeholders() -> None:
    english, chinese = Texts(), Texts.chinese()
    assert set(CHINESE) == set(PLACEHOLDERS)
    for field, declared in PLACEHOLDERS.items():
        assert names_in(getattr(english, field)) == declared, field
        assert names_in(getattr(chinese, field)) == declared, field
        getattr(english, field).format(**dummies(field))
        out = getattr(chinese, field).format(**dummies(field))
        assert getattr(chinese, field) != getattr(english, field), f"{field} is not translated"
        if field not in NO_WORDS:
            assert CJK.search(out), f"{field} has no Chinese in it"


def test_english_is_the_default_and_defines_the_placeholders() -> None:
    assert Texts.english() == Texts() == Texts.for_language("en")
    assert Texts.placeholders() is PLACEHOLDERS
    assert PLACEHOLDERS["cancelled"] == {"call_id", "name"}
    assert PLACEHOLDERS["unknown_tool"] == {"name", "available"}  # {name!r} counts as name
    assert PLACEHOLDERS["length_cut"] == frozenset()
    assert Texts.languages() == LANGUAGES == {"en": "English", "zh": "Simplified Chinese"}


@pytest.mark.parametrize(
    ("tag", "expected"),
    [("en", "en"), ("EN-gb", "en"), ("en_US", "en"), ("zh", "zh"), ("zh-CN", "zh")]
    + [("zh_Hans", "zh"), ("zh-Hans-CN", "zh"), (" zh ", "zh")],
)
def test_for_language_accepts_codes_and_regional_variants(tag: str, expected: str) -> None:
    want = Texts.chinese() if expected == "zh" else Texts.english()
    assert Texts.for_language(tag) == want


@pytest.mark.parametrize("tag", ["fr", "zh-TW", "zh-Hant", "", "english", 3])
def test_for_language_refuses_unknown_languages_listing_the_known_ones(tag: object) -> None:
    with pytest.raises(sr.UsageError, match="known languages are 'en' .*'zh'"):
        Texts.for_language(tag)  # type: ignore[arg-type]


# -- overrides -----------------------------------------------------------------------------


def test_fields_are_overridden_one_by_one_on_top_of_a_language() -> None:
    base = Texts.chinese()
    texts = base.replace(tool_error="工具 {name} 出错了：{error}")
    assert texts.tool_error == "工具 {name} 出错了：{error}"
    assert texts.cancelled == base.cancelled  # the rest stays Chinese
    assert base.tool_error == CHINESE["tool_error"]  # the original is unchanged
    assert texts.replace() is texts
    assert Texts.chinese(tool_error="{error} ({name})").tool_error == "{error} ({name})"
    assert Texts.for_language("zh", plan_empty="空").plan_empty == "空"
    assert Texts.english(plan_empty="nothing").plan_empty == "nothing"
    assert Texts(plan_empty="nothing").cancelled == Texts().cancelled


def test_an_override_may_reorder_repeat_convert_and_use_literal_braces() -> None:
    texts = Texts(
        cancelled="{name!r}: {call_id} {{not a placeholder}} {name:>5} {call_id!s}",
        length_cut="{{}} is fine: literal braces",
    )
    assert texts.cancelled.format(name="a", call_id="c") == "'a': c {not a placeholder}     a c"


def test_replace_refuses_an_unknown_field_and_suggests_the_close_one() -> None:
    with pytest.raises(sr.UsageError, match=r"no field 'canceled' \(did you mean 'cancelled'\?\)"):
        Texts().replace(canceled="x")
    with pytest.raises(sr.UsageError, match="no fields 'a', 'b'"):
        Texts.chinese(a="x", b="y")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("{name} was cancelled", "missing {call_id}"),
        ("Call {call_id}", "missing {name}"),
        ("{call_id} {name} {when}", "extra {when}"),
        ("{call_id} {name} {}", "positional placeholder {}"),
        ("{call_id} {name} {0}", "positional placeholder {0}"),
        ("{call_id} {name.upper}", "no attribute or index"),
        ("{call_id} {name[0]}", "no attribute or index"),
        ("{call_id} {name", "not a valid format string"),
        ("{call_id} {name} }", "not a valid format string"),
        ("{call_id} {name!x}", "does not format"),
        ("{call_id} {name:d}", "does not format"),
        ("{call_id} {name:{width}}", "extra {width}"),
    ],
)
def test_a_bad_override_is_refused_at_configuration_time(value: str, problem: str) -> None:
    with pytest.raises(sr.UsageError) as info:
        Texts(cancelled=value)
    message = str(info.value)
    assert "cancelled" in message
    assert problem in message
    if "format string" not in message:
        assert "it takes exactly {call_id}, {name}" in message


def test_a_text_without_placeholders_takes_none() -> None:
    with pytest.raises(
        sr.UsageError, match=r"length_cut: extra \{name\}; it takes no placeholders"
    ):
        Texts(length_cut="Cut off in {name}.")


def test_a_non_string_is_refused() -> None:
    with pytest.raises(sr.UsageError, match="tool_error must be a str, got NoneType"):
        Texts(tool_error=None)  # type: ignore[arg-type]


def test_all_problems_are_reported_at_once_and_every_path_checks() -> None:
    with pytest.raises(sr.UsageError) as info:
        Texts.chinese(tool_error="{name}", cancelled="{}", plan_empty="{x}")
    message = str(info.value)
    for field in ("tool_error", "cancelled", "plan_empty"):
        assert field in message
    with pytest.raises(sr.UsageError, match=r"refused: missing \{name\}, \{reason\}"):
        dataclasses.replace(Texts(), refused="No.")
    with pytest.raises(sr.UsageError, match=r"refused: missing \{name\}, \{reason\}"):
        Texts().replace(refused="No.")


chunk = st.text(
    st.characters(blacklist_characters="{}", blacklist_categories=["Cs"]), max_size=6
) | st.sampled_from(["{{", "}}", "{{x}}", " ", "：", "\n"])
forms = st.sampled_from(["{%s}", "{%s!r}", "{%s!s}", "{%s:>4}", "{%s:.3}"])
identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,7}", fullmatch=True)


@given(data=st.data())
def test_an_override_is_accepted_iff_its_placeholders_are_the_declared_ones(
    data: st.DataObject,
) -> None:
    field = data.draw(st.sampled_from(sorted(PLACEHOLDERS)))
    declared = sorted(PLACEHOLDERS[field])
    kept = data.draw(st.sets(st.sampled_from(declared)) if declared else st.just(set()))
    extra = data.draw(st.sets(identifiers.filter(lambda n: n not in declared), max_size=2))
    names = sorted(kept | extra)
    occurrences = data.draw(
        st.permutations(names + data.draw(st.lists(st.sampled_from(names))))
        if names
        else st.just([])
    )
    pieces = [data.draw(chunk)]
    for name in occurrences:
        pieces += [data.draw(forms) % name, data.draw(chunk)]
    value = "".join(pieces)
    if set(names) == set(declared):
        texts = Texts(**{field: value})
        assert getattr(texts, field) == value
        value.format(**dummies(field))
    else:
        with pytest.raises(sr.UsageError, match=field):
            Texts(**{field: value})


# -- every field is formatted with exactly its placeholders --------------------------------


def _is_texts(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "texts") or (
        isinstance(node, ast.Attribute) and node.attr == "texts"
    )


def _dict_keys(value: ast.expr, call: ast.Call, parents: dict[ast.AST, ast.AST]) -> set[str]:
    """The keys of ``**value`` in a format call: a dict literal, here or assigned in scope."""
    if isinstance(value, ast.Name):
        scope: ast.AST = call
        while scope in parents and not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            scope = parents[scope]
        for node in ast.walk(scope):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == value.id for t in node.targets)
                and isinstance(node.value, ast.Dict)
            ):
                value = node.value
                break
    assert isinstance(value, ast.Dict), f"cannot read the keys of **{ast.unparse(value)}"
    keys = {k.value for k in value.keys if isinstance(k, ast.Constant)}
    assert len(keys) == len(value.keys), f"cannot read the keys of {ast.unparse(value)}"
    return {str(k) for k in keys}


def uses_of_texts() -> list[tuple[str, str, frozenset[str] | None]]:
    """Where the source reads a field of a ``texts``: (file:line, field, format keys or None)."""
    found: list[tuple[str, str, frozenset[str] | None]] = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name in ("_texts.py", "_texts_zh.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Attribute)
                and node.attr in PLACEHOLDERS
                and _is_texts(node.value)
            ):
                continue
            where = f"{path.relative_to(SRC.parent)}:{node.lineno}"
            method, call = parents.get(node), None
            if isinstance(method, ast.Attribute) and method.attr == "format":
                candidate = parents.get(method)
                if isinstance(candidate, ast.Call) and candidate.func is method:
                    call = candidate
            if call is None:
                found.append((where, node.attr, None))
                continue
            assert not call.args, f"{where}: format texts with keywords only"
            keys: set[str] = set()
            for kw in call.keywords:
                keys |= {kw.arg} if kw.arg is not None else _dict_keys(kw.value, call, parents)
            found.append((where, node.attr, frozenset(keys)))
    return found


def test_the_runtime_formats_every_field_with_exactly_its_placeholders() -> None:
    uses = uses_of_texts()
    assert uses, "no use of texts found: the scan is broken"
    for where, field, keys in uses:
        declared = PLACEHOLDERS[field]
        if keys is None:
            assert not declared, f"{where}: {field} has placeholders; format it where it is read"
        else:
            assert keys == declared, f"{where}: {field} formatted with {sorted(keys)}"
    used = {field for _, field, _ in uses}
    assert set(PLACEHOLDERS) - NOT_WIRED_YET <= used


# -- real runs -----------------------------------------------------------------------------


@sr.tool
def lookup(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: The order id.
    """
    return f"order {order_id}: shipped"


async def test_a_run_in_chinese_tells_the_model_in_chinese() -> None:
    model = ScriptedModel(
        [
            tool_calls(("lokup", {"order_id": "7"})),
            tool_calls(("lookup", {"order_id": "7"}), finish="length"),
            text("好的。"),
        ]
    )
    agent = sr.Agent(name="a", model=model, tools=[lookup])
    texts = Texts.chinese()
    result = await sr.Runtime(sr.MemoryStore(), texts=texts).run(agent, run_id="r", input="查询")
    assert result.status == "completed"
    error = model.requests[1].messages[-1].parts[0]
    assert isinstance(error, ToolResultPart)
    assert error.is_error
    assert error.content == "没有名为 'lokup' 的工具。可用的工具：lookup。"
    assert error.content == texts.unknown_tool.format(name="lokup", available="lookup")
    assert model.requests[2].messages[-1].text == texts.length_cut
    assert "截断" in texts.length_cut


async def test_a_run_uses_a_field_overridden_on_top_of_chinese() -> None:
    model = ScriptedModel([tool_calls(("nope", {})), text("好")])
    agent = sr.Agent(name="a", model=model, tools=[lookup])
    texts = Texts.for_language("zh-CN").replace(unknown_tool="找不到 {name}（可用：{available}）")
    await sr.Runtime(sr.MemoryStore(), texts=texts).run(agent, run_id="r", input="x")
    assert model.requests[1].messages[-1].parts[0].content == "找不到 nope（可用：lookup）"  # type: ignore[union-attr]


# -- docs ----------------------------------------------------------------------------------


def attribute_docs() -> dict[str, str]:
    """The ``Attributes:`` section of the ``Texts`` docstring: field -> description."""
    doc = inspect.getdoc(Texts) or ""
    out: dict[str, str] = {}
    current = ""
    for line in doc.split("Attributes:\n", 1)[1].splitlines():
        if line.startswith("        ") and current:
            out[current] += " " + line.strip()
        elif line.startswith("    "):
            current, _, description = line.strip().partition(": ")
            out[current] = description
    return out


def field_table() -> str:
    docs = attribute_docs()
    rows = ["| Field | Placeholders | Written when | English default |", "|---|---|---|---|"]
    for f in dataclasses.fields(Texts):
        names = ", ".join(f"`{{{n}}}`" for n in sorted(PLACEHOLDERS[f.name])) or "none"
        default = str(f.default).replace("\n", "\\n")
        written = docs[f.name].replace("``", "`")
        rows.append(f"| `{f.name}` | {names} | {written} | `{default}` |")
    return "\n".join(rows)


def test_the_docstring_describes_every_field() -> None:
    assert list(attribute_docs()) == [f.name for f in dataclasses.fields(Texts)]


def test_docs_list_every_field_with_its_placeholders() -> None:
    doc = DOCS.read_text(encoding="utf-8")
    table = doc.split(START, 1)[1].split(END, 1)[0].strip()
    assert table == field_table(), "run `python tests/runtime/test_texts.py` to regenerate"
    for field, declared in PLACEHOLDERS.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| `{field}` |"))
        assert all(f"`{{{n}}}`" in row for n in declared), field


if __name__ == "__main__":
    before, rest = DOCS.read_text(encoding="utf-8").split(START, 1)
    after = rest.split(END, 1)[1]
    DOCS.write_text(f"{before}{START}\n{field_table()}\n{END}{after}", encoding="utf-8")
    print(f"wrote {DOCS}")
