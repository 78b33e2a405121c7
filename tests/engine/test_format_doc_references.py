"""Every reference to a section of docs/FORMAT.md (the bytes) or docs/RECOVERY.md (what
the engine does with them) names a heading or a bold paragraph title that page has, so a
section moved from one page to the other (issue 35) or renamed leaves no reference behind:
in the code's comments, the tests, the other docs and the README."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: `FORMAT.md, "Record"`, `docs/FORMAT.md ("Key index")`, `RECOVERY.md "Retention"`; the
#: name may run over a line break inside a comment.
REFERENCE = re.compile(r'(FORMAT|RECOVERY)\.md,?\s*\(?\s*"([A-Za-z`][^"=]{0,119})"')
COMMENT_MARKS = re.compile(r"\s*(?://[/!]?|#:?)\s*")


def titles(page: str) -> tuple[list[str], list[str]]:
    text = (ROOT / "docs" / f"{page}.md").read_text()
    headings = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
    return headings, re.findall(r"\*\*([^*]+)\*\*", text)


def references() -> list[tuple[str, str, str]]:
    listed = subprocess.check_output(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"]
        + ["storeadapter", "console", "native/src", "tests", "docs", "bench", "README.md"],
        cwd=ROOT,
        text=True,
    ).split()
    found = []
    for name in listed:
        if not name.endswith((".py", ".rs", ".md")) or not (ROOT / name).is_file():
            continue
        for match in REFERENCE.finditer((ROOT / name).read_text()):
            section = " ".join(COMMENT_MARKS.sub(" ", match.group(2)).split())
            found.append((name, match.group(1), section))
    return found


def test_every_reference_to_a_format_or_recovery_section_names_one_that_is_there():
    pages = {page: titles(page) for page in ("FORMAT", "RECOVERY")}
    found = references()

    missing = [
        (where, page, section)
        for where, page, section in found
        if not any(section in heading for heading in pages[page][0])
        and not any(bold.startswith(section) for bold in pages[page][1])
    ]
    assert len(found) > 30
    assert missing == []
