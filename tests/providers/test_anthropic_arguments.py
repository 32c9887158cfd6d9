"""Anthropic's tool-call input, re-written fragment by fragment as a whole response writes it.

A whole response gives the input parsed, and the adapter writes it with ``json.dumps(input,
ensure_ascii=False)``; a stream gives the JSON text the model types. ``JsonRewriter`` turns the
typed pieces into pieces of the ``json.dumps`` text as they come, so a display sees the
arguments being typed and the joined pieces are the arguments ``respond`` gives.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from steadyrun.models._json_rewrite import JsonRewriter


def rewritten(pieces: list[str]) -> list[str]:
    """The rewriter's output for each piece, then for the end."""
    rewriter = JsonRewriter()
    return [rewriter.feed(piece) for piece in pieces] + [rewriter.close()]


def whole(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def test_the_pieces_of_typed_json_come_out_as_json_dumps_writes_them() -> None:
    typed = '{ "city" :"Caf\\u00e9 M', 'üller",\n  "n": [1.50, -0, 1e2,true ,null], "o":{ } }'
    out = rewritten(list(typed))
    assert "".join(out) == whole(json.loads("".join(typed)))
    assert out[0] == '{"city": "Café M'  # the value came out before it was typed to its end


def test_escapes_and_surrogate_pairs_split_anywhere() -> None:
    typed = r'{"q": "a\"b\\c\/d\n\t\u0001 \ud83d\ude00 \ud83d x \ude00 \u00e9"}'
    expected = whole(json.loads(typed))
    for cut in range(len(typed) + 1):
        assert "".join(rewritten([typed[:cut], typed[cut:]])) == expected, cut
    assert "".join(rewritten(list(typed))) == expected


def test_a_text_value_comes_out_while_it_is_typed() -> None:
    rewriter = JsonRewriter()
    assert rewriter.feed('{"body": "Dear') == '{"body": "Dear'
    assert rewriter.feed(" customer,") == " customer,"
    assert rewriter.feed('"}') == '"}'
    assert rewriter.close() == ""


def test_a_number_comes_out_once_it_is_complete() -> None:
    rewriter = JsonRewriter()
    assert rewriter.feed('{"n": 12') == '{"n": '
    assert rewriter.feed("3.50}") == "123.5}"


def test_nothing_typed_gives_nothing() -> None:
    assert "".join(rewritten(["", "  "])) == ""


def test_json_cut_short_keeps_what_was_typed() -> None:
    assert "".join(rewritten(['{"time": "9:0', "0", "\\u00"])) == '{"time": "9:00\\u00'
    assert "".join(rewritten(['{"n": 1'])) == '{"n": 1'


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(codec="utf-8")),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    value=st.dictionaries(st.text(max_size=6), json_values, max_size=5),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
    cuts=st.lists(st.integers(min_value=0), max_size=8),
)
def test_any_input_typed_any_way_comes_out_as_json_dumps_writes_it(
    value: dict[str, Any], ascii_only: bool, indent: int | None, cuts: list[int]
) -> None:
    typed = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert "".join(rewritten(split(typed, cuts))) == whole(json.loads(typed))
