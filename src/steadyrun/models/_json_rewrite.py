"""Typed JSON re-written piece by piece as ``json.dumps(..., ensure_ascii=False)`` writes it.

Anthropic streams a tool call's input as pieces of the JSON text the model types, and gives it
parsed in a whole response, which the adapter writes with ``json.dumps``. To show the
arguments while they are typed and still have the pieces join to what ``respond`` gives,
``JsonRewriter`` re-writes each piece at once: whitespace between tokens dropped, ``, `` and
``: `` as separators, strings decoded and re-encoded character by character (a surrogate pair
given as two escapes becomes one character, as ``json.loads`` makes it), numbers as
``json.dumps`` writes their value. Only a number, an unfinished escape, and a high surrogate
waiting for its low half are held back, so text values come out as they are typed.

For valid JSON the joined output equals ``json.dumps(json.loads(text), ensure_ascii=False)``
(save a repeated key, which ``json.loads`` collapses). The rewriter does not check the grammar:
JSON cut short or broken comes out re-spaced, with what could not be read kept as typed.
"""

from __future__ import annotations

import json
import re

__all__ = ["JsonRewriter"]

_OUTSIDE = {",": ", ", ":": ": ", "{": "{", "}": "}", "[": "[", "]": "]"}
_WHITESPACE = frozenset(" \t\r\n")
_PLAIN = re.compile(r'[^"\\]+')  # string content up to a quote or a backslash
_SHORT_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r"}
_SHORT_ESCAPES["t"] = "\t"
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def _encoded(text: str) -> str:
    """``text`` as ``json.dumps`` writes it inside a string (it maps each character alone)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


class JsonRewriter:
    """Re-writes JSON text fed in pieces; ``feed`` gives what each piece completes."""

    def __init__(self) -> None:
        self._in_string = False
        self._bare = ""  # a number or a literal (true, false, null) being typed
        self._escape = ""  # an escape begun in a string ("\\", "\\u00"...)
        self._high = ""  # a high surrogate escape, written once the next one is known
        self.fed = False  # anything other than whitespace was fed

    def feed(self, piece: str) -> str:
        """The output ``piece`` completes (possibly nothing)."""
        out: list[str] = []
        i = 0
        while i < len(piece):
            if self._in_string:
                i = self._string(piece, i, out)
                continue
            char = piece[i]
            i += 1
            if char in _WHITESPACE:
                self._end_bare(out)
                continue
            self.fed = True
            if char in _OUTSIDE or char == '"':
                self._end_bare(out)
                if char == '"':
                    self._in_string = True
                out.append(_OUTSIDE.get(char, char))
            else:
                self._bare += char
        return "".join(out)

    def close(self) -> str:
        """What is still held back, at the end of the text (as typed, when unfinished)."""
        out: list[str] = []
        self._end_high(out)
        out.append(self._escape)
        self._escape = ""
        self._end_bare(out)
        return "".join(out)

    def _string(self, piece: str, i: int, out: list[str]) -> int:
        """Read string content from ``piece[i]``; return where reading stopped."""
        if self._escape:
            self._escape += piece[i]
            escape = self._escape
            if len(escape) == 6 or (len(escape) == 2 and escape[1] != "u"):
                self._escape = ""
                self._unescape(escape, out)
            return i + 1
        plain = _PLAIN.match(piece, i)
        if plain is not None:
            self._end_high(out)
            out.append(_encoded(plain.group()))
            return plain.end()
        if piece[i] == '"':
            self._end_high(out)
            self._in_string = False
            out.append('"')
        else:
            self._escape = "\\"
        return i + 1

    def _unescape(self, escape: str, out: list[str]) -> None:
        """Write one complete escape (held back when it is a high surrogate)."""
        if escape[1] != "u":
            self._end_high(out)
            char = _SHORT_ESCAPES.get(escape[1])
            out.append(escape if char is None else _encoded(char))
            return
        if not _HEX4.fullmatch(escape, 2):
            self._end_high(out)
            out.append(escape)
            return
        code = int(escape[2:], 16)
        if 0xDC00 <= code <= 0xDFFF and self._high:
            high = int(self._high[2:], 16)
            self._high = ""
            out.append(chr(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)))
            return
        self._end_high(out)
        if 0xD800 <= code <= 0xDBFF:
            self._high = escape
        else:
            out.append(_encoded(chr(code)))

    def _end_high(self, out: list[str]) -> None:
        """Write a held high surrogate alone (nothing that follows pairs with it)."""
        if self._high:
            out.append(_encoded(chr(int(self._high[2:], 16))))
            self._high = ""

    def _end_bare(self, out: list[str]) -> None:
        """Write the number or literal being typed, now complete."""
        bare, self._bare = self._bare, ""
        if not bare:
            return
        try:
            value = json.loads(bare)
        except ValueError:
            out.append(bare)  # not JSON: as typed
            return
        out.append(json.dumps(value) if isinstance(value, int | float) else bare)
