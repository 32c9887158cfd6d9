"""The naming rule for MCP tools: valid, deterministic, collision-free, order-independent."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from steadyrun.extensions._mcp_names import mcp_tool_names
from steadyrun.tools import validate_tool_name

# Names as servers write them: mostly tool-like, sometimes anything at all, sometimes long.
tool_like = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-/ ]{0,80}", fullmatch=True)
names = st.lists(st.one_of(tool_like, st.text(max_size=90)), max_size=12)
prefixes = st.one_of(st.just(""), tool_like, st.text(max_size=20))


def h8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def test_valid_names_keep_their_prefixed_form() -> None:
    assert mcp_tool_names(["add", "get-weather"], prefix="kit") == {
        "add": "kit_add",
        "get-weather": "kit_get-weather",
    }
    assert mcp_tool_names(["add"]) == {"add": "add"}


def test_invalid_or_long_names_are_sanitised_with_a_hash_of_the_full_name() -> None:
    assert mcp_tool_names(["files.read"], prefix="fs") == {
        "files.read": f"fs_files_read_{h8('fs_files.read')}"
    }
    long = "x" * 70
    assert mcp_tool_names([long]) == {long: "x" * 55 + "_" + h8(long)}
    assert mcp_tool_names(["1st"]) == {"1st": f"_1st_{h8('1st')}"}
    assert mcp_tool_names(["été"]) == {"été": f"_t__{h8('été')}"}


def test_names_that_sanitise_alike_stay_apart() -> None:
    got = mcp_tool_names(["files.read", "files_read", "files read"], prefix="fs")
    assert got["files_read"] == "fs_files_read"
    assert len(set(got.values())) == 3


def test_a_taken_name_gets_a_numbered_hash() -> None:
    got = mcp_tool_names(["add"], prefix="kit", taken={"kit_add"})
    assert got == {"add": f"kit_add_{h8('kit_add#1')}"}


def test_a_kept_name_wins_over_a_hashed_name_it_equals() -> None:
    # "a." becomes "a__<hash>"; a server that also has a tool named exactly that keeps it.
    hashed = f"a__{h8('a.')}"
    got = mcp_tool_names(["a.", hashed])
    assert got[hashed] == hashed
    assert got["a."] == f"a__{h8('a.#1')}"


@given(names, prefixes, st.sets(tool_like, max_size=5))
def test_names_are_valid_distinct_and_free(
    originals: list[str], prefix: str, taken: set[str]
) -> None:
    got = mcp_tool_names(originals, prefix=prefix, taken=taken)
    assert set(got) == set(originals)
    assert all(validate_tool_name(name) == [] for name in got.values())
    assert len(set(got.values())) == len(got)  # injective
    assert not set(got.values()) & taken


@given(names, prefixes, st.randoms(use_true_random=False))
def test_names_do_not_depend_on_listing_order(
    originals: list[str], prefix: str, random: object
) -> None:
    shuffled = list(originals)
    random.shuffle(shuffled)  # type: ignore[attr-defined]
    assert mcp_tool_names(shuffled, prefix=prefix) == mcp_tool_names(originals, prefix=prefix)


@given(names, prefixes)
def test_a_name_depends_only_on_its_own_tool_unless_names_collide(
    originals: list[str], prefix: str
) -> None:
    alone = {name: mcp_tool_names([name], prefix=prefix)[name] for name in set(originals)}
    if len(set(alone.values())) == len(alone):
        assert mcp_tool_names(originals, prefix=prefix) == alone
