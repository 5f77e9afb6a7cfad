"""The front-page docs hold together: relative links resolve, and the README opens with the Makefile's commands."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from wisv.timing.hardware import MEASURED_DIR

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
           for p in ROOT.glob(pattern)
           if "results" not in p.parts and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]
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


# results/ as evidence (results/README.md is its index): every directory under results/, and every one a level
# below, is named by a doc, and every results/ path a doc names exists: in the tree, or, where the doc says it is
# in git history (`git show REV:results/...`, `git checkout REV -- results/...`), at that commit.
RESULTS = ROOT / "results"
INDEX = RESULTS / "README.md"
EVIDENCE_DOCS = sorted({ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *RESULTS.rglob("*.md"),
                        *(ROOT / "wisv" / "assets").rglob("*.md")})
RESULTS_PATH = re.compile(r"(?<![\w/.-])(?:([0-9a-f]{7,40}):)?(?:\.\./)*(results/[\w.{},*/-]*)")
HISTORY = re.compile(r"git (?:show|checkout) ([0-9a-f]{7,40})\b")
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*(\.\w+)?")  # results/PATH, results/smollm2/NAME.json


def expand_braces(path: str) -> list[str]:
    """`a/{b,c}/d` -> [`a/b/d`, `a/c/d`] (one level of braces at a time)."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [q for alt in m.group(1).split(",") for q in expand_braces(path[:m.start()] + alt + path[m.end():])]


def cited_results_paths(text: str) -> list[tuple[str | None, str]]:
    """(commit or None, path) for every results/ path a text names, braces expanded; placeholders left out."""
    out = []
    for rev, raw in RESULTS_PATH.findall(text):
        raw = raw.rstrip(".,:;")
        for path in expand_braces(raw):
            if not any(PLACEHOLDER.fullmatch(part) for part in path.split("/")):
                out.append((rev or None, path.rstrip("/") or "results"))
    return out


def in_tree(path: str) -> bool:
    """Whether a path (a glob where it has *) names something under the repository root."""
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


def at_commit(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], bool | None]:
    """(rev, path) -> whether git has the path at that commit; None where it cannot tell (no git, or a shallow clone
    without that commit)."""
    if not pairs:
        return {}
    queries = [f"{rev}^{{commit}}" for rev in sorted({r for r, _ in pairs})] + [f"{r}:{p}" for r, p in pairs]
    try:
        out = subprocess.run(["git", "cat-file", "--batch-check"], input="\n".join(queries) + "\n", cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.splitlines()
        shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True,
                                 text=True, check=True).stdout.strip() == "true"
    except (OSError, subprocess.CalledProcessError):
        return {pair: None for pair in pairs}
    answers = dict(zip(queries, out))
    known = {q.split("^")[0] for q in queries if q.endswith("^{commit}") and not answers[q].endswith("missing")}
    return {(r, p): (not answers[f"{r}:{p}"].endswith("missing")) if r in known else (None if shallow else False)
            for r, p in pairs}


def missing_results_paths(doc: Path, measured_dir: str) -> list[str]:
    """The results/ paths a doc names that exist neither in the tree nor at a commit the doc names for them."""
    text = doc.read_text()
    revs = set(HISTORY.findall(text))
    absent = [(rev, p) for rev, p in cited_results_paths(text) if rev or not (in_tree(p) or p == measured_dir)]
    checks = at_commit(sorted({(r, p) for rev, p in absent for r in ({rev} if rev else revs)}))
    bad = []
    for rev, p in absent:
        found = [checks[(r, p)] for r in ({rev} if rev else revs)]
        if not found or not any(f is None or f for f in found):
            bad.append(f"{rev}:{p}" if rev else p)
    return bad


def tracked_results_dirs() -> list[str]:
    """results/X and results/X/Y for every tracked file below them (every file on disk where git is not there)."""
    try:
        files = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        files = [str(p.relative_to(ROOT)) for p in RESULTS.rglob("*") if p.is_file()]
    dirs = {"/".join(f.split("/")[:n]) for f in files for n in (2, 3) if f.count("/") >= n}
    return sorted(dirs)


def index_names(rel: str, index: str) -> bool:
    """Whether results/README.md names results/<rel>: as `rel/`, or (for X/Y) in the row of X's directory."""
    if re.search(rf"(?<![\w/.-]){re.escape(rel)}/", index):
        return True
    parent, _, child = rel.rpartition("/")
    rows = [ln for ln in index.splitlines() if ln.startswith("|") and ln.count("|") > 2]
    return bool(parent) and any(re.search(rf"(?<![\w/.-]){re.escape(parent)}/", row.split("|")[1])
                                and re.search(rf"(?<![\w.-]){re.escape(child)}(?![\w-])", row) for row in rows)


def uncited_results_dirs(dirs: list[str], docs: list[Path], index: str) -> list[str]:
    """The directories (results/X, results/X/Y) that no doc names."""
    texts = "\n".join(d.read_text() for d in docs)
    return [d for d in dirs if not re.search(rf"(?<![\w-]){re.escape(d)}(?![\w-])", texts)
            and not index_names(d.removeprefix("results/"), index)]


def index_paths_missing(index: str, results: Path) -> list[str]:
    """The paths the index's rows list in their first cell that are not under results/ (above its history section).

    A name in a row is a path from results/, or from a directory (`name/`) the same cell lists, or one level below it
    (`pair1/` to `pair6/`: `compare.json` is each pair's).
    """
    rows = [ln for ln in index.split("\n## In git history only")[0].splitlines() if ln.startswith("| `")]
    missing = []
    for row in rows:
        names = [n for tok in re.findall(r"`([^`]+)`", row.split("|")[1]) for n in expand_braces(tok)]
        bases = [results] + [results / n for n in names if n.endswith("/")]
        missing += [n for n in names if not any((b / n).exists() or any(b.glob(f"*/{n}")) for b in bases)]
    return missing


def test_cited_results_paths_parse() -> None:
    text = ("`results/bench_core.json`, [x](../results/load/batching/), `results/load/{fcfs,slo}` and "
            "`git show eef5e1f:results/drafter-live/feat3/summary.csv`; not results/PATH, wisv/assets/x/results/y "
            "nor runs/results/z; `results/smollm2/NAME.json`")
    assert cited_results_paths(text) == [
        (None, "results/bench_core.json"), (None, "results/load/batching"), (None, "results/load/fcfs"),
        (None, "results/load/slo"), ("eef5e1f", "results/drafter-live/feat3/summary.csv")]


def test_index_names_a_subdirectory_in_its_parents_row() -> None:
    index = "| path | backs |\n| --- | --- |\n| `judge-live/` (runs `poor-q/`, `good-u/`) | x |\n| `soak/` | y |\n"
    assert index_names("judge-live/poor-q", index) and index_names("soak", index)
    assert not index_names("judge-live/poor-ff", index) and not index_names("chaos", index)


def test_uncited_results_dirs_finds_a_dir_no_doc_names(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("the run in `results/load/batching/` and ../results/simulate/fig4; results/load/batching_rtt2")
    dirs = ["results/load", "results/load/batching", "results/load/batching_rtt20", "results/simulate/fig4",
            "results/soak"]
    assert uncited_results_dirs(dirs, [doc], index="| `soak/` | x |") == ["results/load/batching_rtt20"]


def test_every_results_directory_is_cited_by_a_doc() -> None:
    dirs = tracked_results_dirs()
    assert len(dirs) > 20, "found almost no directory under results/: is the listing broken?"
    uncited = uncited_results_dirs(dirs, EVIDENCE_DOCS, INDEX.read_text())
    assert not uncited, f"no doc names these (add a row to results/README.md, or remove them): {uncited}"


@pytest.mark.parametrize("doc", EVIDENCE_DOCS, ids=[str(d.relative_to(ROOT)) for d in EVIDENCE_DOCS])
def test_every_cited_results_path_exists(doc: Path) -> None:
    measured_dir = str(MEASURED_DIR.relative_to(ROOT))  # where measured profiles go; none is committed
    assert missing_results_paths(doc, measured_dir) == [], f"{doc.relative_to(ROOT)} names results that are not there"


@pytest.mark.parametrize("doc", sorted(RESULTS.rglob("*.md")), ids=lambda d: str(d.relative_to(ROOT)))
def test_results_docs_have_no_dangling_relative_link(doc: Path) -> None:
    assert dangling(doc) == [], f"{doc.relative_to(ROOT)} links to missing paths"


def test_index_paths_missing_reads_names_from_the_rows_directories(tmp_path: Path) -> None:
    for f in ("soak/soak.json", "load/runs/pair1/fcfs/sweep.csv", "load/runs/pair1/compare.json", "top.json"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("{}")
    index = ("| path | backs |\n| --- | --- |\n| `soak/` (`soak.json`, `gone.json`) | x |\n"
             "| `load/runs/` (`pair1/`: `compare.json`, `fcfs/sweep.csv`) | y |\n| `top.json`, `lost.json` | z |\n"
             "\n## In git history only\n\n| `old/` | w |\n")
    assert index_paths_missing(index, tmp_path) == ["gone.json", "lost.json"]


def test_every_path_the_index_lists_exists() -> None:
    assert index_paths_missing(INDEX.read_text(), RESULTS) == [], "results/README.md lists paths that are not there"
