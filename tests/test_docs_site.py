"""The documentation site builds strictly from docs/ (broken links, anchors or a page left out of nav fail it), and
the README stays a five-minute read whose every page link exists."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.helpers import REPO

README_LIMIT_BYTES = 15_000


def build(tmp_path, root=REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(root / ".ci" / "docs"), str(tmp_path / "site")], capture_output=True, text=True, timeout=900
    )


@pytest.mark.slow  # installs the docs extra once per clone (PyPI), then about 15 s a build
def test_the_site_builds_strictly_with_the_generated_pages(tmp_path):
    built = build(tmp_path)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    for page in ("index.html", "patches/index.html", "failures/index.html", "known_failures/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    assert "trl.reward-dry-run" in (tmp_path / "site" / "patches" / "index.html").read_text()


@pytest.mark.slow
def test_a_broken_link_fails_the_build(tmp_path):
    copy = tmp_path / "checkout"
    (copy / ".ci").mkdir(parents=True)
    for name in ("mkdocs.yml", "pyproject.toml", ".ci/docs"):
        shutil.copy(REPO / name, copy / name)
    shutil.copytree(REPO / "docs", copy / "docs")
    (copy / ".matrix").mkdir()
    (copy / ".matrix" / "docs-env").symlink_to(REPO / ".matrix" / "docs-env")  # built by the test above, or here
    (copy / "docs" / "script.md").write_text((copy / "docs" / "script.md").read_text() + "\n[gone](no-such-page.md)\n")
    broken = build(tmp_path, copy)
    assert broken.returncode != 0 and "no-such-page.md" in broken.stdout + broken.stderr


def test_the_readme_is_a_five_minute_read_and_links_pages_that_exist():
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) < README_LIMIT_BYTES
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (REPO / target).is_file(), target


def test_every_page_of_docs_is_in_the_sites_nav():
    nav = (REPO / "mkdocs.yml").read_text()
    pages = sorted(str(page.relative_to(REPO / "docs")) for page in (REPO / "docs").rglob("*.md"))
    missing = [page for page in pages if f": {page}\n" not in nav]
    assert not missing, f"add each to mkdocs.yml's nav, one line each: {missing}"
