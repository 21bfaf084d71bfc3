"""The docs check: what a reader of README.md and docs/ on GitHub (or on the site) trips on.

- a relative link (or image) to a file that does not exist, or to an anchor that no heading
  of the target page makes; a link to this repository on GitHub
  (``github.com/actorlog/actorlog/blob/main/...``) naming a file that does not exist;
- a path of this repository named in the text (``examples/service.py``,
  ``tests/telemetry/test_spans.py``, ``scripts/test.sh``) that does not exist;
- an include marker (``--8<--``): GitHub shows it as it is, instead of the included text;
- a table split by a blank line (the rows after it are no longer part of the table);
- a list item repeated on its page (the same bold lead or the same link);
- a mention of DESIGN.md, which is not in the repository (also in the docstrings of
  ``runtime/`` and ``stores/``, which make the API reference pages);
- a code block marked ``<!-- file: PATH -->`` that differs from that file, or one marked
  ``<!-- excerpt: PATH -->`` that is not, line for line, part of it (the tutorial shows
  examples/tutorial.py inline, the service recipe shows parts of examples/service.py).

Each check is a function over a root directory, so the tests at the bottom can prove that
each one fails on a tree with that defect.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GITHUB = re.compile(r"https://github\.com/actorlog/actorlog/(?:blob|tree)/main/([^)\s#?]*)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REPO_PATH = re.compile(
    r"(?<![\w/.~-])((?:examples|tests|docs|scripts|benchmarks|runtime|stores|\.ci)/"
    r"[\w./-]*\w)"
)
FENCE = re.compile(r"^\s*(```|~~~)")
MARKER = re.compile(r"^<!--\s*(file|excerpt):\s*(\S+)\s*-->\s*$")


def pages(root: Path) -> list[Path]:
    """The pages GitHub and the site show: README.md and every docs/**/*.md."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _prose(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def _without_code_spans(line: str) -> str:
    return re.sub(r"`[^`]*`", "", line)


def _slugs(text: str) -> set[str]:
    """The anchors the headings of a page make, as GitHub and as mkdocs (toc) spell them."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _prose(text):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link: its text
        title = unicodedata.normalize("NFKD", title).replace("`", "")
        github = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        mkdocs = re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower())
        for slug in {github, mkdocs}:
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.update({slug, f"{slug}-{n}", f"{slug}_{n}"} if n else {slug})
    return found


def _rel(root: Path, page: Path) -> str:
    return page.relative_to(root).as_posix()


def dead_links(root: Path) -> list[str]:
    problems = []
    for page in pages(root):
        text = page.read_text()
        for n, line in _prose(text):
            for target in LINK.findall(_without_code_spans(line)):
                where = f"{_rel(root, page)}:{n}: {target}"
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    m = GITHUB.match(target)
                    if m and m.group(1) and not (root / m.group(1)).exists():
                        problems.append(f"{where}: no such file in the repository")
                    continue
                path, _, anchor = target.partition("#")
                dest = (page.parent / path).resolve() if path else page
                if not dest.exists():
                    problems.append(f"{where}: no such file")
                    continue
                if anchor and dest.suffix == ".md" and anchor not in _slugs(dest.read_text()):
                    problems.append(f"{where}: no heading makes the anchor #{anchor}")
    return problems


def missing_paths(root: Path) -> list[str]:
    """Paths of the repository named in the text, and in code blocks the scripts a reader
    runs from a clone (``examples/``, ``scripts/``, ``.ci/``): code blocks also show paths
    of the reader's own project (``tests/fixtures/...``). A path counts from the root of
    the repository or from the page's folder."""
    problems = []
    for page in pages(root):
        prose = dict(_prose(page.read_text()))
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for path in REPO_PATH.findall(line):
                path = path.split("::")[0].rstrip(".")
                if "*" in path or "<" in path or "..." in path:
                    continue
                if n not in prose and not path.startswith(("examples/", "scripts/", ".ci/")):
                    continue
                if not (root / path).exists() and not (page.parent / path).exists():
                    problems.append(f"{_rel(root, page)}:{n}: {path} does not exist")
    return problems


def include_markers(root: Path) -> list[str]:
    return [
        f"{_rel(root, page)}:{n}: an include marker GitHub shows as it is: {line.strip()}"
        for page in pages(root)
        for n, line in enumerate(page.read_text().splitlines(), 1)
        if line.strip().startswith("--8<--")
    ]


def split_tables(root: Path) -> list[str]:
    problems = []
    for page in pages(root):
        lines = list(_prose(page.read_text()))
        for (_, before), (n, blank), (_, after) in zip(lines, lines[1:], lines[2:], strict=False):
            if not blank.strip() and before.lstrip().startswith("|") and after.lstrip()[:1] == "|":
                problems.append(f"{_rel(root, page)}:{n}: a table split by a blank line")
    return problems


def design_mentions(root: Path) -> list[str]:
    sources = [*sorted((root / "runtime").rglob("*.py")), *sorted((root / "stores").rglob("*.py"))]
    return [
        f"{_rel(root, f)}:{n}: DESIGN.md is not in the repository"
        for f in [*pages(root), *sources]
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if "DESIGN.md" in line
    ]


def stale_copies(root: Path) -> list[str]:
    problems = []
    for page in pages(root):
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            m = MARKER.match(line)
            if not m:
                continue
            kind, path = m.groups()
            where = f"{_rel(root, page)}:{i + 1}"
            source = root / path
            if not source.exists() or i + 1 >= len(lines) or not FENCE.match(lines[i + 1]):
                problems.append(f"{where}: a {kind} marker needs an existing file and a code block")
                continue
            end = next((j for j in range(i + 2, len(lines)) if FENCE.match(lines[j])), None)
            shown = "\n".join(lines[i + 2 : end]) + "\n"
            code = source.read_text()
            if kind == "file" and shown != code:
                problems.append(f"{where}: the code block is not {path} as it is")
            if kind == "excerpt" and shown not in code:
                problems.append(f"{where}: the code block is not part of {path}")
    return problems


def repeated_items(root: Path) -> list[str]:
    """A list item that leads (up to a colon or code) with the same bold words or the same
    link as an earlier one in its section (README once had two "An operator's view" items,
    and its list of docs named most pages twice, once per link style)."""
    problems = []
    lead = re.compile(r"^\s*[-*] ((?:\*\*[^*]+\*\*|\[[^\]]+\]\([^)]+\))[^:`]*)")
    for page in pages(root):
        seen: dict[str, int] = {}
        for n, line in _prose(page.read_text()):
            if line.startswith("#"):
                seen = {}  # a new section
            m = lead.match(line)
            if not m:
                continue
            item = GITHUB_FILE.sub(_relative_to(root, page), m.group(1)).strip()
            if item in seen:
                problems.append(f"{_rel(root, page)}:{n}: {item} again (line {seen[item]})")
            else:
                seen[item] = n
    return problems


GITHUB_FILE = re.compile(r"https://github\.com/actorlog/actorlog/(?:blob|tree)/main/([^)\s#?]*)")


def _relative_to(root: Path, page: Path) -> Callable[[re.Match[str]], str]:
    """A GitHub link to a file of this repository, as the relative link from ``page``."""

    def relative(m: re.Match[str]) -> str:
        return os.path.relpath(root / m.group(1), page.parent)

    return relative


CHECKS = [
    dead_links,
    missing_paths,
    include_markers,
    split_tables,
    design_mentions,
    stale_copies,
    repeated_items,
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_the_docs_pass(check: object) -> None:
    assert callable(check)
    assert check(ROOT) == []


def test_the_tutorial_shows_its_example_inline() -> None:
    text = (ROOT / "docs" / "tutorial.md").read_text()
    assert "<!-- file: examples/tutorial.py -->" in text
    assert (ROOT / "examples" / "tutorial.py").read_text() in text


# -- each check fails on a tree with its defect ------------------------------------------------


def _tree(tmp_path: Path, readme: str, page: str = "# Page\n\n## A heading\n") -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "examples").mkdir()
    (tmp_path / "runtime").mkdir()
    (tmp_path / "stores").mkdir()
    (tmp_path / "examples" / "demo.py").write_text("a = 1\nb = 2\n")
    (tmp_path / "README.md").write_text(readme)
    (tmp_path / "docs" / "page.md").write_text(page)
    return tmp_path


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        "# R\n\n[p](docs/page.md#a-heading) and [c](#r), `examples/demo.py`,\n"
        "[gh](https://github.com/actorlog/actorlog/blob/main/examples/demo.py)\n\n"
        "| a |\n|---|\n| 1 |\n\n<!-- excerpt: examples/demo.py -->\n```python\nb = 2\n```\n",
    )
    assert [c(root) for c in CHECKS] == [[] for _ in CHECKS]


@pytest.mark.parametrize(
    ("readme", "check", "says"),
    [
        ("[x](docs/gone.md)\n", dead_links, "no such file"),
        ("[x](docs/page.md#nowhere)\n", dead_links, "#nowhere"),
        ("[x](#nowhere)\n", dead_links, "#nowhere"),
        (
            "[x](https://github.com/actorlog/actorlog/blob/main/docs/gone.md)\n",
            dead_links,
            "no such file in the repository",
        ),
        ("run `python examples/gone.py`\n", missing_paths, "examples/gone.py"),
        ('```\n--8<-- "examples/demo.py"\n```\n', include_markers, "include marker"),
        ("| a |\n|---|\n| 1 |\n\n| 2 |\n", split_tables, "split"),
        ("see DESIGN.md section 10\n", design_mentions, "DESIGN.md"),
        ("- **A.** `cmd a`\n- **B.** two\n- **A.** `cmd b`, more\n", repeated_items, "again"),
        (
            "- [d](docs/page.md): one\n"
            "- [d](https://github.com/actorlog/actorlog/blob/main/docs/page.md): two\n",
            repeated_items,
            "again",
        ),
        ("<!-- file: examples/demo.py -->\n```python\na = 1\n```\n", stale_copies, "as it is"),
        ("<!-- excerpt: examples/demo.py -->\n```python\na = 3\n```\n", stale_copies, "part of"),
    ],
)
def test_each_check_finds_its_defect(tmp_path: Path, readme: str, check: object, says: str) -> None:
    assert callable(check)
    found = check(_tree(tmp_path, readme))
    assert len(found) == 1 and says in found[0], found
