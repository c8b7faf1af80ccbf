"""Every repository path a comment or docstring names exists: a file (`apps/chats/jsonl.py`, `templates/base.html`,
`docs/GLOSSARY.md`), a folder (`apps/memories/search/`), or a dotted module, a trailing attribute allowed
(`apps.memories.services.indexing.chat_index_schedule`).

Read from the comments and docstrings of the Python files under apps/, config/, bench/ and tests/; the `//` and
`/* */` comments of the SillyTavern extension (clients/sillytavern/*.js, lib/*.js and tests/*.mjs, whose `lib/...`
paths are relative to the extension's folder) and of bench/*.mjs; the comment lines that open each prompt file
(apps/llm/prompts.py); and the docs: README.md and docs/*.md. A path with a placeholder (`apps/<app>/models.py`) or
a wildcard is a pattern, not a path, and is skipped. No comment may send the reader to a document the repository
does not hold either.

Every relative markdown link in README.md and docs/*.md (`[text](docs/API.md#rest-api)`, images too) leads to a
file or folder of the repository, and its anchor, when it has one, to a heading of that file as GitHub names it."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON_FOLDERS = ("apps", "config", "bench", "tests", "clients/python")
EXTENSION = ROOT / "clients" / "sillytavern"
TOP = ("apps", "config", "clients", "bench", "tests", "templates", "docs", "static")

# A slash path starting at a top-level folder of the repository, or (in the extension) at its lib/ folder.
SLASH_PATH = re.compile(r"(?<![\w./<>-])((?:" + "|".join(TOP) + r"|lib)/[\w./-]*)")
DOTTED_PATH = re.compile(r"(?<![\w./-])((?:apps|config|bench|tests)(?:\.[A-Za-z_]\w*)+)")
# After a match, these mean a pattern rather than a path: `apps/<app>/`, `tests/*.py`, `{a,b}`.
PATTERN_NEXT = set("<{*[$")
FILE_SUFFIXES = {"py", "js", "mjs", "json", "yaml", "yml", "md", "txt", "html", "toml", "cfg", "ini", "jsonl"}
# Documents that are not in the repository.
OUTSIDE = re.compile(
    r"REFERENCE(?:\.md|'s)|STYLE\.md|\.\./shared/"
    r"|\bseeds?(?:'s)? (?:sections?|[A-Z]{2,}\d?\b)|\(seed[ :)]|\bthe seeds?\b(?:'s)?"  # the design documents' labels
)


def _python_files() -> Iterator[Path]:
    for folder in PYTHON_FOLDERS:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _js_files() -> Iterator[Path]:
    yield from sorted(EXTENSION.glob("*.js"))
    yield from sorted((EXTENSION / "lib").glob("*.js"))
    yield from sorted((EXTENSION / "tests").glob("*.mjs"))
    yield from sorted((ROOT / "bench").glob("*.mjs"))


def python_texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0] if node.body else None
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            yield first.lineno, first.value.value


def js_comments(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every `//` and `/* */` comment of a JavaScript file: strings, template literals and regular
    expression literals are skipped, so a URL in a string is not a comment."""
    source = path.read_text(encoding="utf-8")
    i, line, previous = 0, 1, ""  # previous: the last significant character, to tell a regex from a division
    while i < len(source):
        char = source[i]
        if char == "\n":
            line += 1
            i += 1
        elif source.startswith("//", i):
            end = source.find("\n", i)
            end = len(source) if end == -1 else end
            yield line, source[i:end]
            i = end
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            end = len(source) if end == -1 else end + 2
            yield line, source[i:end]
            line += source.count("\n", i, end)
            i = end
        elif char in "'\"`" or (char == "/" and (previous == "" or previous in "(,=:[!&|?{};+-*%<>~^")):
            quote, i = char, i + 1
            in_class = False
            while i < len(source) and (source[i] != quote or in_class):
                if source[i] == "\\":
                    i += 1
                elif quote == "/" and source[i] in "[]":
                    in_class = source[i] == "["
                elif quote == "/" and source[i] == "\n":
                    break  # not a regular expression after all
                elif source[i] == "\n":
                    line += 1
                i += 1
            i += 1
            previous = "a"
        else:
            if not char.isspace():
                previous = char if not (char.isalnum() or char in "_$)]") else "a"
                # `return /x/` and `typeof /x/`: a keyword before a slash starts a regular expression.
                if char.isalpha():
                    word = re.match(r"[A-Za-z_$][\w$]*", source[i:])[0]
                    previous = "(" if word in ("return", "typeof", "case", "in", "of", "void", "yield") else "a"
                    i += len(word)
                    continue
            i += 1


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _doc_texts() -> Iterator[tuple[Path, int, str]]:
    for path in _markdown_files():
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            yield path, number, text


def _prompt_comments() -> Iterator[tuple[Path, int, str]]:
    """The lines before a prompt file's first `### ` section (apps/llm/prompts.py: they are a comment)."""
    for path in sorted((ROOT / "apps").glob("*/prompts/*.txt")):
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if text.startswith("### "):
                break
            yield path, number, text


def texts() -> Iterator[tuple[Path, int, str]]:
    """(file, line, text) of every comment and docstring, of every prompt file's comment and every line of docs/."""
    for path in _python_files():
        for line, text in python_texts(path):
            yield path, line, text
    for path in _js_files():
        for line, text in js_comments(path):
            yield path, line, text
    yield from _prompt_comments()
    yield from _doc_texts()


def _module_exists(dotted: str) -> bool:
    """A module or package, optionally followed by one attribute name."""
    parts = dotted.split(".")
    for keep in (len(parts), len(parts) - 1):
        if keep < 1:
            continue
        base = ROOT.joinpath(*parts[:keep])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    return False


def _slash_exists(path: str, *, extension: bool) -> bool:
    """A file or folder of the repository (in the extension's files, also one of the extension's folder), a
    migration by its number (`apps/sync/migrations/0004`), or a module followed by one attribute
    (`apps/common/jsonpatch.apply_patch`)."""
    bases = (ROOT, EXTENSION) if extension else (ROOT,)
    if any((base / path).exists() for base in bases):
        return True
    if re.fullmatch(r"apps/\w+/migrations/\d{4}", path):  # a migration named by its number
        return any((ROOT / path).parent.glob(f"{(ROOT / path).name}_*.py"))
    module, _, attribute = path.rpartition(".")
    return (
        bool(module)
        and "/" not in attribute
        and attribute not in FILE_SUFFIXES
        and (any((base / f"{module}.py").is_file() for base in bases))
    )


def named_paths(text: str, *, extension: bool = False) -> Iterator[tuple[int, str, bool]]:
    """(offset, path, slash) for every path named in a text: slash paths, or dotted modules. A slash path ends at
    the first character that cannot be in one; trailing dots (a sentence's end) are not part of it. `lib/...`
    counts only in the extension's files."""
    for match in SLASH_PATH.finditer(text):
        path = match.group(1).rstrip(".")
        after = text[match.start(1) + len(path) : match.start(1) + len(path) + 1]
        if after in PATTERN_NEXT or path.endswith(("-", "_")) or (path.startswith("lib/") and not extension):
            continue
        yield match.start(1), path, True
    for match in DOTTED_PATH.finditer(text):
        after = text[match.end(1) : match.end(1) + 1]
        if after in PATTERN_NEXT or after == "/" or match.group(1).rsplit(".", 1)[1] in FILE_SUFFIXES:
            continue  # a pattern, a slash path, or a file such as SillyTavern's config.yaml
        yield match.start(1), match.group(1), False


def missing_paths() -> list[str]:
    missing = []
    for source, line, text in texts():
        extension = source.is_relative_to(EXTENSION)
        for offset, path, slash in named_paths(text, extension=extension):
            exists = _slash_exists(path, extension=extension) if slash else _module_exists(path)
            if not exists:
                where = line + text.count("\n", 0, offset)
                missing.append(f"{source.relative_to(ROOT)}:{where}: {path}")
    return missing


def outside_references() -> list[str]:
    found = []
    for source, line, text in texts():
        for match in OUTSIDE.finditer(text):
            where = line + text.count("\n", 0, match.start())
            found.append(f"{source.relative_to(ROOT)}:{where}: {match.group(0)!r}")
    return found


# `[text](target)` or `![alt](target "title")`; the target has no spaces.
MARKDOWN_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of a markdown file outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def _without_code_spans(line: str) -> str:
    return re.sub(r"`+[^`]*`+", "", line)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without markup, lower case, punctuation dropped, spaces as
    hyphens (`Speed, and other users' data` → `speed-and-other-users-data`)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    text = re.sub(r"[`*~]|<[^>]+>", "", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def markdown_anchors(path: Path) -> set[str]:
    """Every anchor of a markdown file's headings; a repeated heading gets `-1`, `-2`, … as on GitHub."""
    anchors: set[str] = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            anchor, count = github_anchor(heading.group(1)), 0
            while (anchor if not count else f"{anchor}-{count}") in anchors:
                count += 1
            anchors.add(anchor if not count else f"{anchor}-{count}")
    return anchors


def broken_links(files: list[Path] | None = None, *, root: Path = ROOT) -> list[str]:
    """`file:line: target` of every relative link in the markdown files (README.md and docs/*.md) whose file is
    not in the repository (`root`), or whose anchor names no heading of it."""
    broken = []
    for source in files or _markdown_files():
        for number, line in _prose_lines(source.read_text(encoding="utf-8")):
            for match in MARKDOWN_LINK.finditer(_without_code_spans(line)):
                target = match.group(1)
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: outside the repository
                    continue
                file_part, _, anchor = target.partition("#")
                linked = (source.parent / file_part).resolve() if file_part else source
                where = f"{source.relative_to(root)}:{number}: {target}"
                if not linked.is_relative_to(root) or not linked.exists():
                    broken.append(f"{where} (no such file)")
                elif anchor and (linked.suffix != ".md" or anchor not in markdown_anchors(linked)):
                    broken.append(f"{where} (no such heading)")
    return broken


def test_every_link_in_the_docs_leads_to_a_file_and_heading():
    broken = broken_links()
    for entry in broken:
        print(entry)
    assert not broken, "Links in README.md or docs/ that lead nowhere:\n" + "\n".join(broken)


def test_link_checker_names_anchors_as_github_does(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Speed, and other users' data\n## `make run` in detail\n## Notes\n## Notes\n```\n# not a heading\n```\n",
        encoding="utf-8",
    )
    assert markdown_anchors(page) == {"speed-and-other-users-data", "make-run-in-detail", "notes", "notes-1"}
    line = 'See [a](docs/A.md#x), ![b](img.png "t"), [web](https://x.org) and `[not](a link)`.'
    assert [m.group(1) for m in MARKDOWN_LINK.finditer(_without_code_spans(line))] == [
        "docs/A.md#x",
        "img.png",
        "https://x.org",
    ]
    (tmp_path / "README.md").write_text(
        "[ok](page.md#notes-1) [here](#top) [gone](missing.md) [no heading](page.md#nowhere) [out](../x.md)\n# Top\n",
        encoding="utf-8",
    )
    assert broken_links([tmp_path / "README.md"], root=tmp_path) == [
        "README.md:1: missing.md (no such file)",
        "README.md:1: page.md#nowhere (no such heading)",
        "README.md:1: ../x.md (no such file)",
    ]


def test_every_path_named_in_a_comment_or_docstring_exists():
    missing = missing_paths()
    for entry in missing:
        print(entry)
    assert not missing, "Paths named in comments or docstrings that do not exist:\n" + "\n".join(missing)


def test_comments_cite_no_document_outside_the_repository():
    found = outside_references()
    for entry in found:
        print(entry)
    assert not found, "Comments or docstrings citing a document the repository does not hold:\n" + "\n".join(found)


def test_the_path_finder_reads_comments_and_docstrings_only(tmp_path):
    python = tmp_path / "example.py"
    python.write_text(
        '"""See apps/chats/jsonl.py and apps.memories.services.indexing.chat_index_schedule."""\n'
        'URL = "apps/not/a/comment.py"  # but apps/sync/apis/nowhere.py is\n'
        "def f():\n"
        '    """Pattern apps/<app>/models.py, folder apps/memories/search/."""\n',
        encoding="utf-8",
    )
    found = [(line, path) for line, text in python_texts(python) for _, path, _ in named_paths(text)]
    assert sorted(found) == [
        (1, "apps.memories.services.indexing.chat_index_schedule"),
        (1, "apps/chats/jsonl.py"),
        (2, "apps/sync/apis/nowhere.py"),
        (4, "apps/memories/search/"),
    ]
    script = tmp_path / "example.js"
    script.write_text(
        "const url = 'https://x/apps/no.py'; // see lib/plan.js\n"
        "const re = /\\/\\//g; /* apps/chats/models.py\n"
        "   over two lines */ const s = `// not ${1} a comment`;\n",
        encoding="utf-8",
    )
    assert [(line, text.split()[-1]) for line, text in js_comments(script)] == [
        (1, "lib/plan.js"),
        (2, "*/"),
    ]
    assert _module_exists("apps.memories.services.indexing.chat_index_schedule")
    assert not _module_exists("apps.memories.services.nowhere.thing")
