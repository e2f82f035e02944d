"""Rust source with its comments, strings and char literals blanked out,
for the checks of .ci/ (`lengths`, `layers`), which count braces and read
paths and must see neither inside a comment or a string.

`blank(text)` returns text of the same length, line for line: every
character of a comment (`//`, nested `/* */`), of a string's contents
(`"..."`, `b"..."`, raw `r#"..."#`, across lines) and of a char literal
(`'{'`, `'\\n'`) becomes a space, newlines kept, so that a position in the
result is the same line and column of the source. A lifetime or a label
(`'a`, `'static`) is code and stays. What it does not read: a doc
comment's code (blanked as a comment), and a macro's own syntax (read as
code)."""

import re

_RAW = re.compile(r"b?r(#*)\"")


def blank(text):
    """The text with comments, string contents and char literals blanked."""
    out = list(text)
    n = len(text)
    i = 0

    def wipe(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        prev = text[i - 1] if i else " "
        word_start = not (prev.isalnum() or prev == "_")
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            wipe(i, end)
            i = end
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif word_start and (m := _RAW.match(text, i)):
            close = '"' + m.group(1)
            start = m.end()
            end = text.find(close, start)
            end = n if end < 0 else end
            wipe(start, end)
            i = end + len(close)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            wipe(i + 1, j)
            i = j + 1
        elif c == "'":
            # A char literal: `'x'` or an escape `'\n'`, `'\u{7FFF}'`;
            # anything else after a quote is a lifetime or a label.
            if text.startswith("\\", i + 1):
                end = text.find("'", i + 3)
                end = n if end < 0 else end
                wipe(i + 1, end)
                i = end + 1
            elif i + 2 < n and text[i + 2] == "'" and text[i + 1] != "\n":
                wipe(i + 1, i + 2)
                i += 3
            else:
                i += 1
        else:
            i += 1
    return "".join(out)
