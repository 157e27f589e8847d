"""The lab extension and the DAG view take their colours from the JupyterLab theme.

JupyterLab's light and dark themes (and any third-party theme) set ``--jp-*`` CSS variables; a
front end that writes ``#dc2626`` or ``white`` reads well in one theme only. So the extension's CSS
and TypeScript (labextension/style/*.css, labextension/src/*.ts, js/src/dagview.css, js/src/*.ts)
hold no colour literal -- hex, ``rgb()``/``hsl()`` and friends, or a CSS named colour -- except as
the fallback of ``var(--jp-..., fallback)``, which applies where no theme sets the variable (the
notebook widget in VS Code or classic Notebook). The LabIcon SVG follows JupyterLab's icon
convention instead: a ``fill`` on an element of class ``jp-icon*`` is recoloured per theme by
JupyterLab's own CSS, so it is allowed there. Static SVG/PNG pictures made in Python keep fixed
colours and are not read here. docs/jupyterlab.md ("Theming") lists the variables used.

Each test fails naming the file, line and literal found.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CSS_GLOBS = ("labextension/style/*.css", "js/src/*.css")
TS_GLOBS = ("labextension/src/*.ts", "js/src/*.ts")

# CSS Color 4 named colours (transparent and currentColor are not literals of a colour)
NAMED = (
    "aliceblue antiquewhite aqua aquamarine azure beige bisque black blanchedalmond blue blueviolet brown "
    "burlywood cadetblue chartreuse chocolate coral cornflowerblue cornsilk crimson cyan darkblue darkcyan "
    "darkgoldenrod darkgray darkgreen darkgrey darkkhaki darkmagenta darkolivegreen darkorange darkorchid "
    "darkred darksalmon darkseagreen darkslateblue darkslategray darkslategrey darkturquoise darkviolet "
    "deeppink deepskyblue dimgray dimgrey dodgerblue firebrick floralwhite forestgreen fuchsia gainsboro "
    "ghostwhite gold goldenrod gray green greenyellow grey honeydew hotpink indianred indigo ivory khaki "
    "lavender lavenderblush lawngreen lemonchiffon lightblue lightcoral lightcyan lightgoldenrodyellow "
    "lightgray lightgreen lightgrey lightpink lightsalmon lightseagreen lightskyblue lightslategray "
    "lightslategrey lightsteelblue lightyellow lime limegreen linen magenta maroon mediumaquamarine "
    "mediumblue mediumorchid mediumpurple mediumseagreen mediumslateblue mediumspringgreen "
    "mediumturquoise mediumvioletred midnightblue mintcream mistyrose moccasin navajowhite navy oldlace "
    "olive olivedrab orange orangered orchid palegoldenrod palegreen paleturquoise palevioletred "
    "papayawhip peachpuff peru pink plum powderblue purple rebeccapurple red rosybrown royalblue "
    "saddlebrown salmon sandybrown seagreen seashell sienna silver skyblue slateblue slategray slategrey "
    "snow springgreen steelblue tan teal thistle tomato turquoise violet wheat white whitesmoke yellow "
    "yellowgreen"
).split()
HEX = re.compile(r"#[0-9a-fA-F]{3,8}\b")
FUNCTION = re.compile(r"\b(?:rgba?|hsla?|hwb|lab|lch|oklab|oklch|color)\(", re.IGNORECASE)
NAMED_WORD = re.compile(r"(?<![\w-])(" + "|".join(NAMED) + r")(?![\w-])", re.IGNORECASE)
# properties whose value is a colour, as written in TS (inline styles, SVG attributes, CSS text)
COLOUR_PROPERTY = re.compile(
    r"(?:\b|-)(?:color|background(?:Color|-color)?|fill|stroke|border(?:Color|-color)?|outline(?:Color|-color)?"
    r"|boxShadow|box-shadow)\b\s*(?:=|:)\s*[\"'`]?\s*([^;\"'`}]*)",
    re.IGNORECASE,
)
# an SVG element of JupyterLab's icon convention: its fill/stroke are set per theme by jp-icon* rules
ICON_ELEMENT = re.compile(r"<[^<>]*\bclass=\"[^\"]*\bjp-icon[\w-]*[^\"]*\"[^<>]*>")


def _files(globs: tuple[str, ...]) -> list[Path]:
    found = sorted({path for pattern in globs for path in REPO.glob(pattern)})
    assert found, f"no file matches {globs}"
    return found


def _blank(text: str, start: int, end: int) -> str:
    """``text`` with [start, end) replaced by spaces, newlines kept (so line numbers still hold)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def _strip_fallbacks(text: str) -> str:
    """Blank out the fallback of every ``var(--jp-NAME, fallback)`` (nested parentheses balanced)."""
    for match in reversed(list(re.finditer(r"var\(\s*--jp-[\w-]+\s*,", text))):
        depth, index = 1, match.end()
        while index < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[index], 0)
            index += 1
        text = _blank(text, match.end(), index - 1)
    return text


def _strip_comments(text: str, *, line_comments: bool) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.DOTALL)
    if line_comments:
        text = re.sub(r"(?m)(^|[^:\"'`\\])//[^\n]*", lambda m: m.group(1), text)
    return text


def _name(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def _hits(path: Path, text: str, *, named: list[tuple[int, str]]) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern in (HEX, FUNCTION):
            found += [f"{_name(path)}:{number}: {m.group()}" for m in pattern.finditer(line)]
    found += [f"{_name(path)}:{number}: {word}" for number, word in named]
    return found


def _css_named(text: str) -> list[tuple[int, str]]:
    """Named colours in declaration values (the insides of rule blocks, not selectors like ``.rho-red``)."""
    found = []
    for block in re.finditer(r"\{([^{}]*)\}", text):
        for declaration in re.finditer(r"[\w-]+\s*:([^;]*)", block.group(1)):
            start = block.start(1) + declaration.start(1)
            for m in NAMED_WORD.finditer(declaration.group(1)):
                found.append((text.count("\n", 0, start + m.start()) + 1, m.group()))
    return found


def _ts_named(text: str) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for declaration in COLOUR_PROPERTY.finditer(line):
            found += [(number, m.group()) for m in NAMED_WORD.finditer(declaration.group(1))]
    return found


def css_literals(path: Path) -> list[str]:
    text = _strip_fallbacks(_strip_comments(path.read_text(), line_comments=False))
    text = re.sub(r"@import[^;]*;", "", text)
    return _hits(path, text, named=_css_named(text))


def ts_literals(path: Path) -> list[str]:
    text = _strip_comments(path.read_text(), line_comments=True)
    for match in reversed(list(ICON_ELEMENT.finditer(text))):
        text = _blank(text, match.start(), match.end())
    text = _strip_fallbacks(text)
    return _hits(path, text, named=_ts_named(text))


@pytest.mark.parametrize("path", _files(CSS_GLOBS), ids=lambda p: str(p.relative_to(REPO)))
def test_css_has_no_colour_literal(path: Path) -> None:
    found = css_literals(path)
    assert not found, "colour literals outside var(--jp-..., fallback):\n" + "\n".join(found)


@pytest.mark.parametrize("path", _files(TS_GLOBS), ids=lambda p: str(p.relative_to(REPO)))
def test_typescript_has_no_colour_literal(path: Path) -> None:
    found = ts_literals(path)
    assert not found, "colour literals outside var(--jp-..., fallback):\n" + "\n".join(found)


def test_the_checks_find_what_they_must(tmp_path: Path) -> None:
    """The reader is not blind: literals are found, fallbacks and the icon convention are not."""
    css = tmp_path / "x.css"
    css.write_text(
        ".a { color: #123456; }\n.b { border: 1px solid red; }\n.c { background: rgb(1, 2, 3); }\n"
        ".d { color: var(--jp-ui-font-color1, #111); fill: var(--jp-error-color1, var(--jp-x, white)); }\n"
        ".rho-red { color: var(--rho-fg); }\n/* #abcdef in a comment */\n.e { color: var(--rho-x, #222); }\n"
    )
    got = [hit.split(": ", 1)[1] for hit in css_literals(css)]
    assert sorted(got) == sorted(["#123456", "rgb(", "red", "#222"]), got
    ts = tmp_path / "x.ts"
    ts.write_text(
        'const icon = `<g class="jp-icon3" fill="#616161"><path/></g>`;\n'
        'chip.style.background = "#fee2e2";\n'
        'node.style.color = "white";\n'
        'const ok = "var(--jp-brand-color1, #2563eb)";\n'
        "// a comment naming #ffffff\n"
        "const green = 1; // an identifier is no colour\n"
        'el.setAttribute("stroke", "var(--rho-state-failure)");\n'
        'const bad = `<rect fill="hsl(0, 50%, 50%)"/>`;\n'
    )
    got = [hit.split(": ", 1)[1] for hit in ts_literals(ts)]
    assert sorted(got) == sorted(["#fee2e2", "hsl(", "white"]), got
