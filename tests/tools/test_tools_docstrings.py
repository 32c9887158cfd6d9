"""The Google-style docstring parser."""

from steadyrun.tools._docstrings import parse_docstring


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
