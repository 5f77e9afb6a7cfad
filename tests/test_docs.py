"""The front-page docs hold together: relative links resolve, and the README opens with the Makefile's commands."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "results" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)  # code blocks: their brackets are code, not links


def relative_links(text: str) -> list[str]:
    """Link targets outside code blocks that point into the repository (no scheme, no bare #anchor)."""
    targets = LINK.findall(FENCE.sub("", text))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    """Anchors of a Markdown file's headings (outside code blocks)."""
    return {slug(h) for h in re.findall(r"^#+ (.+)$", FENCE.sub("", doc.read_text()), re.M)}


def dangling(doc: Path) -> list[str]:
    """Relative link targets of one Markdown file whose path, or heading anchor in a .md target, does not exist."""
    bad = []
    for target in relative_links(doc.read_text()):
        path, _, anchor = target.partition("#")
        dest = doc.parent / path
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            bad.append(target)
    return bad


def make_recipe(target: str) -> str:
    """The command line of a Makefile target's recipe (its last line)."""
    text = (ROOT / "Makefile").read_text()
    block = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, re.M)
    assert block, f"no '{target}' target in the Makefile"
    return block.group(1).strip().splitlines()[-1].strip()


def test_relative_links_filter() -> None:
    text = "[a](docs/x.md#y) ![f](r/f.png) [w](https://e.org) [s](#top)\n```\n[c](not/a/link)\n```\n"
    assert relative_links(text) == ["docs/x.md#y", "r/f.png"]


def test_slug() -> None:
    assert slug("The main job: `python -m testbed.run`") == "the-main-job-python--m-testbedrun"
    assert slug("Results: SLO-aware vs FCFS") == "results-slo-aware-vs-fcfs"


def test_dangling_finds_a_missing_target(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A\nx")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](there.md#a) [gone](missing.md) [no anchor](there.md#b)")
    assert dangling(doc) == ["missing.md", "there.md#b"]


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_no_dangling_relative_link(doc: Path) -> None:
    assert doc.exists()
    assert dangling(doc) == [], f"{doc.relative_to(ROOT)} links to missing paths"


def test_docs_pages_exist() -> None:
    names = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {"protocols.md", "decision-head.md", "simulator.md", "multi-ue.md", "link-emulation.md",
            "results.md", "spec.md", "papers.md"} <= names


def test_readme_opens_with_the_make_commands() -> None:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "README has no bash block"
    lines = block.group(1).strip().splitlines()
    assert [ln.split()[:2] for ln in lines] == [["make", "demo"], ["make", "test"]]
    for line, target in zip(lines, ("demo", "test")):
        command = make_recipe(target).replace("$(BIN)/", "")  # e.g. python -m testbed.run --protocol auto
        assert command in line, f"README's `make {target}` line does not name `{command}`"


SOURCES = [p for pattern in ("*.md", "docs/*.md", "*/**/*.py", "Makefile", "pyproject.toml")
           for p in ROOT.glob(pattern) if "results" not in p.parts and ".venv" not in p.parts]
CITE = re.compile(r"SPEC (WISP )?eqs?\. ((?:\d+(?:\s*[-–/,]\s*|\s+and\s+)?)+)")  # "SPEC eqs. 3-10"; "SPEC WISP eq. 19"


def cited_equations(text: str) -> set[tuple[str, int]]:
    """("WISV" or "WISP", n) for every equation a "SPEC eq. N" citation names (ranges expanded)."""
    out = set()
    for wisp, nums in CITE.findall(text):
        for lo, hi in re.findall(r"(\d+)(?:\s*[-–]\s*(\d+))?", nums):
            out |= {("WISP" if wisp else "WISV", n) for n in range(int(lo), int(hi or lo) + 1)}
    return out


def spec_equations() -> set[tuple[str, int]]:
    """The equations docs/spec.md states, as "(N)" in its WISV and WISP sections."""
    text = (ROOT / "docs" / "spec.md").read_text()
    wisv, _, rest = text.partition("\n## WISP")
    wisp = rest.partition("\n## SpecEdge")[0]
    return {(name, int(n)) for name, part in (("WISV", wisv), ("WISP", wisp)) for n in re.findall(r"\((\d+)\)", part)}


def test_cited_equations_parse() -> None:
    assert cited_equations("SPEC eqs. 3-10; SPEC eq. 20, SPEC eqs. 6/10 and SPEC WISP eq. 19") == (
        {("WISV", n) for n in range(3, 11)} | {("WISV", 20), ("WISP", 19)})


def test_every_cited_equation_is_in_the_spec() -> None:
    cited = set().union(*(cited_equations(p.read_text(errors="replace")) for p in SOURCES))
    assert len(cited) > 20, "the citation pattern found almost nothing: is it broken?"
    missing = sorted(cited - spec_equations())
    assert not missing, f"cited but not in docs/spec.md: {missing}"


OUTSIDE_DIR = "shared"  # the spec's and papers' directory beside the repository (spelled apart: grep finds no path)
OUTSIDE = re.compile(rf"\.\./{OUTSIDE_DIR}|{OUTSIDE_DIR}/(SPEC|papers)")


def test_nothing_points_outside_the_repository() -> None:
    outside = [f"{p.relative_to(ROOT)}" for p in SOURCES if OUTSIDE.search(p.read_text(errors="replace"))]
    assert not outside, f"these point outside the repository: {outside}"


PROJECT_PACKAGES = ("scripts", "testbed", "wisv", "labeling", "channel", "protocols", "config")
COMMAND = re.compile(r"python3? -m ([A-Za-z_][A-Za-z0-9_.]*)")


def documented_modules(text: str) -> set[str]:
    """The project modules a text runs with ``python -m`` (placeholders such as ``testbed.X`` or
    ``scripts.FOLDER.MODULE`` left out)."""
    found = {m for m in COMMAND.findall(text) if m.split(".")[0] in PROJECT_PACKAGES}
    return {m for m in found if not any(part.isupper() for part in m.split("."))}


def module_exists(root: Path, module: str) -> bool:
    """Whether ``python -m module`` finds a file in this tree: ``a/b.py`` or a package ``a/b/__main__.py``."""
    path = root.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def test_documented_modules_finds_commands() -> None:
    text = ("run `python -m scripts.bench.core --prompts 3`, python3 -m testbed.X, python -m scripts.FOLDER.MODULE, "
            "not python -m pytest -q")
    assert documented_modules(text) == {"scripts.bench.core"}
    assert module_exists(ROOT, "scripts.bench.core") and module_exists(ROOT, "labeling")
    assert not module_exists(ROOT, "scripts.bench_core")


COMMAND_DOCS = [*DOCS, ROOT / "Makefile", *sorted((ROOT / "wisv" / "assets").glob("*/*.md"))]


@pytest.mark.parametrize("doc", COMMAND_DOCS, ids=[str(d.relative_to(ROOT)) for d in COMMAND_DOCS])
def test_every_documented_command_module_exists(doc: Path) -> None:
    missing = sorted(m for m in documented_modules(doc.read_text()) if not module_exists(ROOT, m))
    assert missing == [], f"{doc.relative_to(ROOT)} runs modules that do not exist"


def test_docs_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    listed = {t.partition("#")[0] for t in relative_links(index)}
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages - listed == set(), "docs/README.md does not list these pages"
