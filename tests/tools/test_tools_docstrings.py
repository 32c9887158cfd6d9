"""Docstrings parsed by griffe: Google, NumPy and Sphinx styles."""

import logging
from typing import Any

import pytest
from griffe import Docstring, DocstringSectionKind, Parser

from steadyrun.tools import tool
from steadyrun.tools._docstrings import (
    _GOOGLE_SECTIONS,
    _normalise_google_headers,
    parse_docstring,
)


def test_empty_and_none() -> None:
    assert parse_docstring(None).description == ""
    assert parse_docstring("   \n ").params == {}


def test_summary_only() -> None:
    doc = parse_docstring("  Just a summary.  ")
    assert doc.description == "Just a summary."
    assert doc.params == {}


def test_sections_end_the_description_and_only_args_are_params() -> None:
    doc = parse_docstring(
        """Summary line.

        Body that mentions Usage: inline and
        keeps going.

        Arguments:
            a: First.
            b (dict(str, int)): Typed with nested parentheses.
            *rest: Star names lose their stars.
        Raises:
            ValueError: not a param.
        Returns:
            x: not a param either.

        Text after sections is not part of the description.
        """
    )
    assert doc.description == "Summary line.\n\nBody that mentions Usage: inline and\nkeeps going."
    assert doc.params == {
        "a": "First.",
        "b": "Typed with nested parentheses.",
        "rest": "Star names lose their stars.",
    }


def test_multiline_entries_and_paragraphs() -> None:
    doc = parse_docstring(
        """S.

        Args:
            first: Starts here
                and continues: even with a colon.

                New paragraph.
            second:
                Description only on the next line.
        """
    )
    assert doc.params == {
        "first": "Starts here and continues: even with a colon.\n\nNew paragraph.",
        "second": "Description only on the next line.",
    }


def test_section_header_case_and_spacing() -> None:
    doc = parse_docstring("S.\n\nParameters :\n    x: The x.\n")
    assert doc.params == {"x": "The x."}
    assert doc.description == "S."


def test_google_header_without_blank_line_above() -> None:
    # Griffe alone reads a header glued to the summary as prose; such docstrings worked before.
    doc = parse_docstring(
        """Get the weather.
        Args:
            city: The city.
        """
    )
    assert doc.description == "Get the weather."
    assert doc.params == {"city": "The city."}


def test_google_keyword_and_other_parameters_are_params() -> None:
    doc = parse_docstring(
        """S.

        Keyword Args:
            k: A keyword.

        Other Parameters:
            o: Another.

        Note:
            Not a parameter.
        """
    )
    assert doc.params == {"k": "A keyword.", "o": "Another."}
    assert doc.description == "S."


def test_numpy_style() -> None:
    doc = parse_docstring(
        """Add two numbers.

        Longer body.

        Parameters
        ----------
        a : int
            The first
            number.
        b, c
            Shared text.
        *rest : str
            Stars go.

        Returns
        -------
        int
            Not a parameter.
        """
    )
    assert doc.description == "Add two numbers.\n\nLonger body."
    assert doc.params == {
        "a": "The first number.",
        "b": "Shared text.",
        "c": "Shared text.",
        "rest": "Stars go.",
    }


def test_sphinx_style() -> None:
    doc = parse_docstring(
        """Add two numbers.

        :param a: The first
            number.
        :type a: int
        :param int b: Second.
        :param \\*rest: Stars go.
        :keyword k: A keyword.
        :returns: Not a parameter.
        :raises ValueError: Nor this.
        """
    )
    assert doc.description == "Add two numbers."
    assert doc.params == {
        "a": "The first number.",
        "b": "Second.",
        "rest": "Stars go.",
        "k": "A keyword.",
    }


def test_griffe_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    # Untyped parameters in the docstring are the norm for tools: no warning per parameter.
    with caplog.at_level(logging.DEBUG, logger="griffe"):
        parse_docstring("S.\n\nArgs:\n    x: The x.\n\n:param y: Y.\n")
    assert caplog.records == []


@pytest.mark.parametrize("name", sorted(_GOOGLE_SECTIONS))
def test_normalised_headers_are_griffe_sections(name: str) -> None:
    # The normalisation may only touch headers griffe takes as sections: one of prose would
    # become an admonition and cut the description short.
    text = _normalise_google_headers(f"Summary.\n{name.title()} :\n    x: The x.\n")
    kinds = [section.kind for section in Docstring(text).parse(Parser.google, warnings=False)]
    assert kinds[0] is DocstringSectionKind.text
    assert kinds[1] not in (DocstringSectionKind.text, DocstringSectionKind.admonition)


@pytest.mark.parametrize("style", ["numpy", "sphinx"])
def test_tool_schema_from_other_styles(style: str) -> None:
    def numpy(city: str, days: int = 1) -> str:
        """Forecast.

        Parameters
        ----------
        city
            The city.
        days
            How many days.
        """
        return city

    def sphinx(city: str, days: int = 1) -> str:
        """Forecast.

        :param city: The city.
        :param days: How many days.
        """
        return city

    made: Any = tool(numpy if style == "numpy" else sphinx)
    assert made.description == "Forecast."
    assert made.parameters["properties"]["city"]["description"] == "The city."
    assert made.parameters["properties"]["days"]["description"] == "How many days."
