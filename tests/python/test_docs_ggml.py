"""docs/ggml.md holds only code that runs: every fenced block has a language; a `text` block is
a picture and is skipped; every other block is preceded by `<!-- from PATH: NAME -->` and equals,
character for character once the common indentation is stripped, the lines of PATH between
`// docs/ggml.md: NAME` and `// end docs/ggml.md: NAME` (`#` in shell). PATH must be a file of
RUN_BY, the table of what builds and runs each file, and every row of the table is checked
against the files it names, so that neither the doc nor the table can drift from what runs.
Standard library only; no build needed."""
import collections
import os
import re
import shutil
import textwrap

from conftest import ROOT

DOC = "docs/ggml.md"

# Each file a block may come from, and what makes it run: (file, text) pairs, each text on a
# line of that file that is not a comment.
RUN_BY = {
    ".ci/run": [
        (".ci/run", "stage ggml ggml_stage"),
    ],
    "examples/ggml_graph.cpp": [
        ("examples/CMakeLists.txt", "add_executable(ggml_graph ggml_graph.cpp)"),
        (".ci/run", "./build-ggml/examples/ggml_graph --vocab"),
    ],
    "examples/ggml_cuda_step.cpp": [
        ("examples/CMakeLists.txt", "add_executable(ggml_cuda_step ggml_cuda_step.cpp)"),
        ("scripts/ggml-gpu-check.sh", '"$dir/examples/ggml_cuda_step" --blocks'),
    ],
    "tests/ggml/errors_test.cpp": [
        ("tests/ggml/CMakeLists.txt", "file(GLOB DFSEL_GGML_TEST_SOURCES CONFIGURE_DEPENDS"),  # every .cpp
        ("tests/ggml/CMakeLists.txt", "add_executable(dfsel_ggml_tests ${DFSEL_GGML_TEST_SOURCES})"),
        ("tests/ggml/CMakeLists.txt",
         "gtest_discover_tests(dfsel_ggml_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ggml)"),
        (".ci/run", "ctest --test-dir build-ggml -L ggml"),
    ],
    "scripts/ggml-topk-gpu-check.sh": [
        ("scripts/ggml-gpu-check.sh", 'bash scripts/ggml-topk-gpu-check.sh --out "$out" --stages "$topk_stages"'),
    ],
    "tests/ggml_meta/meta_route_test.cpp": [
        ("tests/ggml_meta/CMakeLists.txt", "add_executable(dfsel_ggml_meta_tests meta_route_test.cpp"),
        ("scripts/ggml-meta-check.sh", "--gtest_filter='GgmlMetaRoute.TwoCpuDevicesReadInPlace'"),
        (".ci/run", "bash scripts/ggml-meta-check.sh --build build-ggml"),
    ],
}

FENCE = re.compile(r"^\s*(```|~~~)(.*)$")
SOURCE = re.compile(r"^<!-- from (\S+): (\S+) -->$")
MARKER = re.compile(r"^(?://|#) (end )?docs/ggml\.md: (\S+)$")


Block = collections.namedtuple("Block", "line lang source body first")


def blocks(doc_text):
    """Every fenced block: the fence's line number, the language, (PATH, NAME) from the line
    before the fence or None, the body, and the index of the body's first line."""
    lines = doc_text.split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and lines[i].strip() != m.group(1):
            i += 1
        source = SOURCE.match(lines[start - 1]) if start > 0 else None
        found.append(Block(start + 1, m.group(2).strip(), source.groups() if source else None,
                           "\n".join(lines[start + 1:i]), start + 1))
        i += 1
    return found


def regions(text):
    """{name: body} of the marked regions of a file, and the problems with its markers."""
    found, open_at, problems = {}, {}, []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = MARKER.match(line.strip())
        if not m:
            continue
        end, name = m.group(1), m.group(2)
        if not end:
            if name in open_at or name in found:
                problems.append("region %s is marked twice" % name)
            open_at[name] = i
        elif name not in open_at:
            problems.append("region %s ends without a start" % name)
        else:
            found[name] = "\n".join(lines[open_at.pop(name) + 1:i])
    problems += ["region %s has no end" % name for name in open_at]
    return found, problems


def is_code_line(line, text):
    return text in line and not line.lstrip().startswith(("#", "//", "/*", "*"))


def run_by_problems(root):
    """Rows of RUN_BY whose files do not say what the row says."""
    problems = []
    for source, needs in sorted(RUN_BY.items()):
        if not os.path.isfile(os.path.join(root, source)):
            problems.append("%s does not exist" % source)
        for path, text in needs:
            full = os.path.join(root, path)
            lines = open(full).read().split("\n") if os.path.isfile(full) else []
            if not any(is_code_line(line, text) for line in lines):
                problems.append("%s: %s has no line running %r" % (source, path, text))
    return problems


def check(root):
    """Every problem of docs/ggml.md under root: an empty list when each block is what runs."""
    problems = run_by_problems(root)
    shown = set()
    marked = {}
    for path in RUN_BY:
        full = os.path.join(root, path)
        if os.path.isfile(full):
            found, bad = regions(open(full).read())
            marked[path] = found
            problems += ["%s: %s" % (path, p) for p in bad]
    for b in blocks(open(os.path.join(root, DOC)).read()):
        where = "%s:%d" % (DOC, b.line)
        if not b.lang:
            problems.append("%s: a block without a language (`text` for what is not code)" % where)
            continue
        if b.lang == "text":
            continue
        if not b.source:
            problems.append("%s: a %s block with no `<!-- from PATH: NAME -->` line above it" % (where, b.lang))
            continue
        path, name = b.source
        if path not in RUN_BY:
            problems.append("%s: %s is not a file that a check builds and runs (RUN_BY)" % (where, path))
            continue
        region = marked.get(path, {}).get(name)
        if region is None:
            problems.append("%s: %s has no region %s" % (where, path, name))
            continue
        shown.add((path, name))
        if textwrap.dedent(b.body) != textwrap.dedent(region):
            problems.append("%s: the block differs from %s, region %s" % (where, path, name))
    for path, found in sorted(marked.items()):
        problems += ["%s: region %s is shown by no block of %s" % (path, name, DOC)
                     for name in sorted(found) if (path, name) not in shown]
    return problems


def copy_of_root(tmp_path):
    """The doc and every file RUN_BY names, copied under tmp_path."""
    files = {DOC} | set(RUN_BY) | {path for needs in RUN_BY.values() for path, _ in needs}
    for path in files:
        os.makedirs(os.path.dirname(os.path.join(str(tmp_path), path)), exist_ok=True)
        shutil.copy(os.path.join(ROOT, path), os.path.join(str(tmp_path), path))
    return str(tmp_path)


def edit(root, path, old, new):
    full = os.path.join(root, path)
    text = open(full).read()
    assert old in text, (path, old)
    open(full, "w").write(text.replace(old, new, 1))


def test_every_block_of_docs_ggml_is_code_that_runs():
    assert check(ROOT) == []


def test_every_file_of_the_table_is_shown_in_the_doc():
    sources = {b.source[0] for b in blocks(open(os.path.join(ROOT, DOC)).read()) if b.source}
    assert sources == set(RUN_BY)


def test_one_character_changed_in_any_block_fails(tmp_path):
    root = copy_of_root(tmp_path)
    assert check(root) == []
    doc = open(os.path.join(root, DOC)).read()
    code = [b for b in blocks(doc) if b.lang != "text"]
    assert len(code) == 8
    for b in code:
        middle = len(b.body) // 2
        changed = b.body[:middle] + ("x" if b.body[middle] != "x" else "y") + b.body[middle + 1:]
        lines = doc.split("\n")
        lines[b.first:b.first + b.body.count("\n") + 1] = changed.split("\n")
        open(os.path.join(root, DOC), "w").write("\n".join(lines))
        assert check(root) == ["%s:%d: the block differs from %s, region %s" % ((DOC, b.line) + b.source)]
    open(os.path.join(root, DOC), "w").write(doc)
    assert check(root) == []


def test_one_character_changed_in_a_region_fails(tmp_path):
    root = copy_of_root(tmp_path)
    edit(root, "examples/ggml_graph.cpp", "= DFSEL_BACKEND_CPU;", "= DFSEL_BACKEND_CPu;")
    line = next(b.line for b in blocks(open(os.path.join(root, DOC)).read())
                if b.source == ("examples/ggml_graph.cpp", "graph"))
    assert check(root) == ["%s:%d: the block differs from examples/ggml_graph.cpp, region graph" % (DOC, line)]


def test_a_block_without_language_or_source_fails(tmp_path):
    root = copy_of_root(tmp_path)
    edit(root, DOC, "```text\n", "```\n")
    edit(root, DOC, "<!-- from examples/ggml_graph.cpp: graph -->\n", "")
    problems = check(root)
    assert len(problems) == 3, problems  # the bare block, the unnamed one, and its region unshown
    assert "a block without a language" in problems[0]
    assert "a cpp block with no `<!-- from PATH: NAME -->` line above it" in problems[1]
    assert problems[2] == "examples/ggml_graph.cpp: region graph is shown by no block of docs/ggml.md"


def test_a_file_that_no_check_runs_fails(tmp_path):
    root = copy_of_root(tmp_path)
    edit(root, DOC, "<!-- from examples/ggml_graph.cpp: graph -->", "<!-- from examples/ggml_op.cpp: graph -->")
    problems = check(root)
    assert len(problems) == 2, problems  # the file, and its region of ggml_graph.cpp unshown
    assert "examples/ggml_op.cpp is not a file that a check builds and runs" in problems[0]


def test_a_missing_marker_fails(tmp_path):
    root = copy_of_root(tmp_path)
    edit(root, "tests/ggml/errors_test.cpp", "  // end docs/ggml.md: refusal\n", "")
    problems = check(root)
    assert "tests/ggml/errors_test.cpp: region refusal has no end" in problems, problems


def test_the_run_by_table_fails_when_a_runner_stops_running_its_file(tmp_path):
    root = copy_of_root(tmp_path)
    step = '"$dir/examples/ggml_cuda_step" --blocks'
    edit(root, "scripts/ggml-gpu-check.sh", step, "# " + step)
    graph = "  ./build-ggml/examples/ggml_graph --vocab"
    edit(root, ".ci/run", graph, "  #" + graph)
    problems = check(root)
    assert len(problems) == 3, problems  # the two rows, and the doc's block of that stage
    cuda_step, graph = [p for p in problems if " has no line running " in p]
    assert cuda_step.startswith("examples/ggml_cuda_step.cpp: scripts/ggml-gpu-check.sh has no line"), cuda_step
    assert graph.startswith("examples/ggml_graph.cpp: .ci/run has no line"), graph


def test_the_build_block_is_in_cis_ggml_stage():
    text = open(os.path.join(ROOT, ".ci/run")).read()
    body = text[text.index("\nggml_stage() {\n"):]
    body = body[:body.index("\n}\n")]
    assert "# docs/ggml.md: build" in body and "# end docs/ggml.md: build" in body
