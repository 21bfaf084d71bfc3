"""mkdocs hooks (mkdocs.yml ``hooks:``): the site's changelog page is CHANGELOG.md.

docs/changelog.md is what GitHub shows (a link to CHANGELOG.md: GitHub would show an
include marker as it is); on the site its text is replaced by CHANGELOG.md itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if page.file.src_uri == "changelog.md":
        return (ROOT / "CHANGELOG.md").read_text()
    return markdown
