"""bench/plot/make_figures.py on the committed results: every picture is written and not empty,
every plotted value is the value of the JSON row it names (read here from the file itself), that
row comes from the newest file of its GPU that holds it, the figures drawn carry exactly those
values (read back from the matplotlib artists, not from pixels), docs/figures/ is what the
command makes of the committed results, and a later run's JSON is picked up by itself. A picture
with nothing recorded for its GPU is still drawn (the words that nothing is, and what is missing)
and need not be in docs/figures/.

Needs matplotlib (python3-matplotlib, which scripts/install-deps.sh installs); under CI=true a
missing matplotlib fails these tests instead of skipping them. The library is not needed."""
import copy
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

import pytest

from conftest import ROOT

try:
    import matplotlib
    matplotlib.use("Agg")
except ImportError:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise  # CI installs python3-matplotlib (scripts/install-deps.sh): its absence is a failure there
    pytest.skip("matplotlib is not installed (apt-get install python3-matplotlib)", allow_module_level=True)

sys.path.insert(0, os.path.join(ROOT, "bench", "plot"))
sys.path.insert(0, os.path.join(ROOT, "bench", "python"))
import bench_step  # noqa: E402  (the writers of the PyTorch figures' files, importable without torch)
import bench_topk  # noqa: E402
import figures  # noqa: E402
import make_figures  # noqa: E402

EXPECTED = ("step-timeline", "topk-floor", "step-scaling", "ggml-cuda", "ggml-topk")
UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


@pytest.fixture(scope="module")
def descs():
    return make_figures.describe(ROOT)


def points(desc):
    for panel in desc["panels"]:
        for s in panel["series"]:
            for i, pt in enumerate(s["points"]):
                yield s, i, pt


def raw_value(where, root=ROOT):
    """The value a figure says it read, read here straight from its file."""
    with open(os.path.join(root, where["file"])) as f:
        data = json.load(f)
    row, field = where["row"], where["field"]
    m = re.fullmatch(r"(against_torch|rows)\[(\d+)\]", row)
    if m:
        return data[m.group(1)][int(m.group(2))][field]
    if "label_b" in data:
        return next(r[field] for r in data["rows"] if r["name"] == row)
    rows = [b for b in data["benchmarks"] if (b.get("run_name") or b["name"]) == row]
    median = [b for b in rows if b.get("aggregate_name") == "median"]
    rows = median or [b for b in rows if b.get("run_type") != "aggregate"]
    value = statistics.median(b[field] for b in rows)
    return value * UNIT_US[rows[0]["time_unit"]] if field == "real_time" else value


def file_date(path):
    with open(path) as f:
        data = json.load(f)
    ctx = data.get("context", {}) if isinstance(data, dict) else {}
    if ctx.get("date"):
        return ctx["date"][:19], data
    return re.search(r"\d{4}-\d{2}-\d{2}", os.path.basename(path)).group(0) + "T00:00:00", data


def holds(data, row, field):
    if "label_b" in data:
        return any(r["name"] == row and field in r for r in data["rows"])
    if "benchmarks" in data:
        return any((b.get("run_name") or b["name"]) == row and field in b for b in data["benchmarks"])
    return False


def test_every_gpu_with_results_gets_every_picture(tmp_path, descs):
    assert "NVIDIA H200" in descs
    written = make_figures.write(descs, str(tmp_path))
    for gpu in descs:
        for name in EXPECTED:
            png = tmp_path / make_figures.gpu_slug(gpu) / (name + ".png")
            assert str(png) in written
            head = png.read_bytes()[:8]
            assert head == b"\x89PNG\r\n\x1a\n", png
            assert 10_000 < png.stat().st_size < 400_000, (png, png.stat().st_size)
            assert json.loads((tmp_path / make_figures.gpu_slug(gpu) / (name + ".json")).read_text())["figure"] == name


def test_every_plotted_value_is_the_json_value_of_the_newest_file(descs):
    checked = 0
    for gpu, figs in descs.items():
        for d in figs:
            assert d["gpu"] == gpu, d["figure"]
            if not any(points(d)):  # nothing of it recorded for this GPU: no file read, and it says so
                assert d["sources"] == [] and d["missing"], d["figure"]
                continue
            assert d["sources"], d["figure"]
            for s, i, pt in points(d):
                where = pt["from"]
                assert raw_value(where) == pytest.approx(pt["value"], rel=1e-12), (d["figure"], s["id"], where)
                assert any(src["file"] == where["file"] for src in d["sources"]), where
                if where["kind"] in ("gbench", "ab"):
                    # No file of this GPU dated later holds that row with that field.
                    mine, _ = file_date(os.path.join(ROOT, where["file"]))
                    for folder in ("bench/results", "bench/python/results"):
                        for name in os.listdir(os.path.join(ROOT, folder)):
                            path = os.path.join(ROOT, folder, name)
                            if not name.endswith(".json") or "-attempt" in name:
                                continue
                            date, data = file_date(path)
                            if str(data.get("context", {}).get("replays_per_timing", "1")) != "1":
                                continue  # timed another way: the plotter reads none of it
                            if date > mine and data.get("context", {}).get("gpu") == gpu:
                                assert not holds(data, where["row"], where["field"]), (where, name)
                checked += 1
    assert checked > 40


def test_the_committed_cases_are_drawn(descs):
    h200 = {d["figure"]: d for d in descs["NVIDIA H200"]}
    one_rank = [p for p in h200["step-timeline"]["panels"] if p["ranks"] == 1]
    assert [p["tokens"] for p in one_rank] == [16, 256]
    for p in one_rank:
        assert {s["lane"] for s in p["series"] if s["style"] == "span"} == {"topk", "gate", "lattice"}
    topk = h200["topk-floor"]["panels"][0]
    assert len(topk["series"][0]["points"]) >= 9 and len(topk["series"][1]["points"]) >= 7
    ids = {s["id"] for p in h200["step-scaling"]["panels"] for s in p["series"] if s["points"]}
    assert {"step:dfsel", "step:floor", "step:torch", "dspark:dfsel", "dspark:w2floor", "dspark:torch",
            "dspark:cublas"} <= ids
    blocks = [pt["x"] for p in h200["step-scaling"]["panels"] for s in p["series"] if s["id"] == "step:dfsel"
              for pt in s["points"]]
    assert blocks == [1, 4, 16, 64]
    torch = [pt["x"] for p in h200["step-scaling"]["panels"] for s in p["series"] if s["id"] == "step:torch"
             for pt in s["points"]]
    assert torch == [1, 4, 16, 64]
    # every top-K shape has its floor and torch's bar beside it
    n = len(topk["categories"])
    assert n >= 19 and [len(s["points"]) for s in topk["series"]] == [n, n, n]
    assert not h200["topk-floor"]["missing"] and not h200["step-timeline"]["missing"]


def drawn_values(fig):
    """gid -> the numbers a drawn artist carries."""
    out = {}
    for a in fig.findobj(lambda a: (a.get_gid() or "").startswith("series:")):
        if hasattr(a, "get_height"):
            out[a.get_gid()] = (a.get_x(), a.get_width(), a.get_height())
        else:
            out[a.get_gid()] = (list(a.get_xdata()), list(a.get_ydata()))
    return out


def test_the_drawn_figures_carry_the_values(descs):
    for figs in descs.values():
        for d in figs:
            fig = figures.draw(d)
            drawn = drawn_values(fig)
            for panel in d["panels"]:
                for s in panel["series"]:
                    vals = [pt["value"] for pt in s["points"]]
                    if not vals:
                        continue
                    gid = "series:" + s["id"]
                    if s["style"] == "bar":
                        for i, v in enumerate(vals):
                            assert drawn[gid + ":%d" % i][2] == pytest.approx(v), (gid, i)
                    elif s["style"] == "span":
                        x, w, _ = drawn[gid]
                        assert (x, x + w) == pytest.approx(tuple(vals)), gid
                    elif s["style"] == "line":
                        xs, ys = drawn[gid]
                        assert ys == pytest.approx(vals) and xs == pytest.approx([pt["x"] for pt in s["points"]]), gid
                    elif s["style"] == "hline":
                        assert drawn[gid][1] == pytest.approx(vals * 2), gid
                    elif s["style"] == "vline":
                        assert drawn[gid][0] == pytest.approx(vals * 2), gid


def test_docs_figures_are_what_the_command_makes_of_the_committed_results(descs):
    for gpu, figs in descs.items():
        for d in figs:
            path = os.path.join(ROOT, "docs", "figures", make_figures.gpu_slug(gpu), d["figure"] + ".json")
            if not os.path.exists(path) and not any(points(d)):
                assert d["missing"], d["figure"]  # nothing recorded yet: its placeholder need not be committed
                continue
            assert os.path.exists(path), "%s is missing: run python3 bench/plot/make_figures.py" % path
            with open(path) as f:
                committed = json.load(f)
            assert committed == json.loads(json.dumps(d)), \
                "%s is stale: run python3 bench/plot/make_figures.py and commit docs/figures/" % path
            assert os.path.getsize(path[:-5] + ".png") > 10_000


def test_a_later_run_is_picked_up_by_itself(tmp_path):
    """A newer StepTimeline file with two simulated ranks and more kernels, and a DSpark PyTorch
    JSON, dropped into a copy of the results: the same command draws them, nothing else changes."""
    for folder in ("bench/results", "bench/python/results"):
        shutil.copytree(os.path.join(ROOT, folder), str(tmp_path / folder))
    with open(os.path.join(ROOT, "bench/results/h200-2026-12-01-step.json")) as f:
        step = json.load(f)
    later = copy.deepcopy(step)
    later["context"]["date"] = "2026-12-09T10:00:00+00:00"
    later["context"]["command"] = "dfsel_bench --benchmark_filter='^StepTimeline/'"
    rows = []
    for b in step["benchmarks"]:
        if not b["name"].startswith("StepTimeline/tokens:16/"):
            continue
        one = copy.deepcopy(b)
        one["gate_end"] = 9.5
        rows.append(one)
        two = copy.deepcopy(b)
        two["name"] = two["run_name"] = b["name"].replace("StepTimeline/", "StepTimeline/ranks:2/").replace(
            "/f32/bf16/", "/f32/bf16/sharded/")
        for k in [k for k in two if k.endswith(("_start", "_end"))]:
            del two[k]  # a group's row names every part by its rank
        t = 0.0
        for part in ("topk", "gate", "records", "agree", "exchange", "lattice"):
            for r in (0, 1):
                two.update({"%s_r%d_start" % (part, r): t, "%s_r%d_end" % (part, r): t + 1.5})
                t += 1.0
        two.update(step=t + 0.5, exchange_n=4)
        rows.append(two)
    later["benchmarks"] = rows
    (tmp_path / "bench/results/h200-2026-12-09-timeline.json").write_text(json.dumps(later))
    dspark = {"gpu": "NVIDIA H200", "torch": "2.11", "dfsel": "0.2",
              "rows": [{"blocks": 1, "vocab": 163840, "rank": 256, "n_draft": 7, "torch_us": 315.0, "dfsel_us": 257.0,
                        "cublas_us": 204.5},
                       {"blocks": 8, "vocab": 163840, "rank": 256, "n_draft": 7, "torch_us": 394.0, "dfsel_us": 590.0}]}
    (tmp_path / "bench/python/results/h200-2026-12-09-bench_dspark.json").write_text(json.dumps(dspark))

    assert make_figures.main(["--root", str(tmp_path), "--out", str(tmp_path / "figs")]) == 0
    for name in EXPECTED:
        assert (tmp_path / "figs" / "h200" / (name + ".png")).stat().st_size > 10_000
    d = {x["figure"]: x for x in make_figures.describe(str(tmp_path))["NVIDIA H200"]}
    panels = {(p["ranks"], p["placement"], p["tokens"]): p for p in d["step-timeline"]["panels"]}
    gate = next(s for s in panels[(1, None, 16)]["series"] if s.get("lane") == "gate")
    assert gate["points"][1]["value"] == 9.5 and gate["points"][1]["from"]["file"].endswith("2026-12-09-timeline.json")
    sharded = panels[(2, "sharded", 16)]
    assert [(s["lane"], s["rank"]) for s in sharded["series"] if s["style"] == "span"] == \
        [(part, r) for part in ("topk", "gate", "records", "agree", "exchange", "lattice") for r in (0, 1)]
    agree1 = next(s for s in sharded["series"] if s["id"].endswith(":agree:r1"))
    assert [pt["value"] for pt in agree1["points"]] == [7.0, 8.5]
    assert [pt["from"]["field"] for pt in agree1["points"]] == ["agree_r1_start", "agree_r1_end"]
    assert not sharded["notes"]
    assert not any("ranks:2/tokens:16" in m and "sharded" in m for m in d["step-timeline"]["missing"])
    assert d["step-timeline"]["sources"][0]["command"] == "dfsel_bench --benchmark_filter='^StepTimeline/'"
    torch = next(s for p in d["step-scaling"]["panels"] for s in p["series"] if s["id"] == "dspark:torch")
    assert [(pt["x"], pt["value"]) for pt in torch["points"]] == [(1, 315.0), (8, 394.0)]
    cublas = next(s for p in d["step-scaling"]["panels"] for s in p["series"] if s["id"] == "dspark:cublas")
    assert [(pt["x"], pt["value"], pt["from"]["field"]) for pt in cublas["points"]] == [(1, 204.5, "cublas_us")]
    assert not any("DSpark PyTorch" in m for m in d["step-scaling"]["missing"])


def copy_results(tmp_path):
    for folder in ("bench/results", "bench/python/results"):
        shutil.copytree(os.path.join(ROOT, folder), str(tmp_path / folder))


def write_step_file(tmp_path, blocks, name="h200-2026-12-09-bench_python.json"):
    """bench_step.py's file with its against_torch rows at these blocks (V 248320) and one block
    at V 202048, made by the script's own row function; the rest as the committed file."""
    with open(os.path.join(ROOT, "bench/python/results/h200-2026-12-01-bench_python-second.json")) as f:
        data = json.load(f)
    data["date"] = "2026-12-09T11:00:00+00:00"
    data["command"] = "python3 bench/python/bench_step.py --json %s" % name
    rows = []
    for vocab, b in [(figures.STEP_VOCAB, b) for b in blocks] + [(202048, 1)]:
        paths = [[1000 + i, 7] for i in range(b)]
        rows.append(bench_step.against_torch_row(vocab, b, bench_step.rotation_copies(b * 16 * vocab * 4),
                                                 [20.0 + b], [200.0 + 10 * b + (vocab != figures.STEP_VOCAB)],
                                                 (10, 50), (1, 40), paths, paths))
    data["against_torch"] = rows
    (tmp_path / "bench/python/results" / name).write_text(json.dumps(data))
    return data


def test_torch_topk_and_the_pytorch_selector_by_blocks_are_drawn(tmp_path):
    """A bench_topk.py file (TorchTopK rows in Google Benchmark's layout) and a bench_step.py file
    at 1, 4, 16 and 64 blocks, written by the scripts' own functions into a copy of the results:
    the command draws torch.topk beside every ShardTopK shape and the PyTorch selector at each
    block count, and no longer lists them as missing."""
    copy_results(tmp_path)
    rows, want = [], {}
    for i, shape in enumerate(bench_topk.SHAPES):
        rounds = [60.0 + i + r for r in (0.5, 0.0, 2.0)]  # the median, 60.5 + i, is drawn
        rows += bench_topk.benchmark_rows(shape, rounds, 50, 10, bench_step.rotation_copies(
            bench_topk.shape_bytes(shape)), family_index=i)
        want[shape] = 60.5 + i
    ctx = {"date": "2026-12-09T10:00:00+00:00", "gpu": "NVIDIA H200", "executable": bench_topk.EXECUTABLE,
           "command": "python3 bench/python/bench_topk.py --json bench/python/results/h200-2026-12-09-bench_topk.json"}
    (tmp_path / "bench/python/results/h200-2026-12-09-bench_topk.json").write_text(
        json.dumps(bench_topk.result_json(ctx, rows)))
    write_step_file(tmp_path, bench_step.BLOCKS)

    d = {x["figure"]: x for x in make_figures.describe(str(tmp_path))["NVIDIA H200"]}
    topk = d["topk-floor"]
    panel = topk["panels"][0]
    torch = next(s for s in panel["series"] if s["id"] == "topk:torch")
    dfsel = next(s for s in panel["series"] if s["id"] == "topk:dfsel")
    assert [pt["key"] for pt in torch["points"]] == [pt["key"] for pt in dfsel["points"]] == panel["categories"]
    for pt, (t, v, _, _, k, dtype, _) in zip(torch["points"], figures._topk_shapes(make_index(tmp_path))):
        assert pt["value"] == want[(t, v, dtype, k)], pt["key"]
        assert pt["from"] == {"file": "bench/python/results/h200-2026-12-09-bench_topk.json",
                              "row": bench_topk.bench_name((t, v, dtype, k)), "field": "real_time", "kind": "gbench"}
        assert raw_value(pt["from"], str(tmp_path)) == pt["value"]
    assert not any("torch.topk" in m for m in topk["missing"])
    assert not any("torch.topk" in n for n in panel["notes"])
    assert ctx["command"] in [s["command"] for s in topk["sources"]]

    scaling = d["step-scaling"]
    line = next(s for p in scaling["panels"] for s in p["series"] if s["id"] == "step:torch")
    assert [(pt["x"], pt["value"]) for pt in line["points"]] == [(1, 210.0), (4, 240.0), (16, 360.0), (64, 840.0)]
    for pt in line["points"]:
        assert pt["from"]["file"] == "bench/python/results/h200-2026-12-09-bench_python.json"
        assert raw_value(pt["from"], str(tmp_path)) == pt["value"]
    assert not any("PyTorch selector" in m for m in scaling["missing"])
    assert "python3 bench/python/bench_step.py --json h200-2026-12-09-bench_python.json" in [
        s["command"] for s in scaling["sources"]]

    for desc in (topk, scaling):
        drawn = drawn_values(figures.draw(desc))
        for s in (torch, line):
            if s["id"].startswith("topk") != (desc is topk):
                continue
            if s["style"] == "bar":
                assert [drawn["series:%s:%d" % (s["id"], i)][2] for i in range(len(s["points"]))] == pytest.approx(
                    [pt["value"] for pt in s["points"]])
            else:
                assert drawn["series:" + s["id"]] == ([1, 4, 16, 64], [210.0, 240.0, 360.0, 840.0])


def make_index(root):
    import results
    return results.Index(results.load(str(root)), "NVIDIA H200")


@pytest.mark.parametrize("blocks,note", [
    ((1,), "the PyTorch selector beyond 1 block (bench_step.py measures one block)"),
    ((1, 4), "the PyTorch selector beyond 4 blocks (bench_step.py measures 1, 4 blocks)"),
    ((1, 16), "the PyTorch selector at 4, 64 blocks (the newest bench_step.py JSON measures 1, 16)"),
    ((4, 16, 64), "the PyTorch selector at 1 block (the newest bench_step.py JSON measures 4, 16, 64)"),
])
def test_the_missing_note_names_the_blocks_the_pytorch_selector_lacks(tmp_path, blocks, note):
    copy_results(tmp_path)
    write_step_file(tmp_path, blocks)
    d = {x["figure"]: x for x in make_figures.describe(str(tmp_path))["NVIDIA H200"]}["step-scaling"]
    line = next(s for p in d["panels"] for s in p["series"] if s["id"] == "step:torch")
    assert [pt["x"] for pt in line["points"]] == list(blocks)  # never the V 202048 row
    assert [m for m in d["missing"] if "PyTorch selector" in m] == [note]


def test_a_bench_step_file_without_blocks_is_one_block(tmp_path):
    """bench_step.py files before the block counts hold one-block rows that do not say so: drawn
    at one block, and the picture says no other block count was measured."""
    for folder in ("bench/results", "bench/python/results"):
        shutil.copytree(os.path.join(ROOT, folder), str(tmp_path / folder))
    for name in os.listdir(str(tmp_path / "bench/python/results")):
        path = tmp_path / "bench/python/results" / name
        if name.endswith(".json") and "against_torch" in json.loads(path.read_text()) and \
                any("blocks" in r for r in json.loads(path.read_text())["against_torch"]):
            path.unlink()  # only the files of one block, without the field, are left
    d = {x["figure"]: x for x in make_figures.describe(str(tmp_path))["NVIDIA H200"]}["step-scaling"]
    line = next(s for p in d["panels"] for s in p["series"] if s["id"] == "step:torch")
    assert [pt["x"] for pt in line["points"]] == [1]
    assert "the PyTorch selector beyond 1 block (bench_step.py measures one block)" in d["missing"]

def test_a_file_timed_another_way_is_not_drawn(tmp_path):
    """A newer dfsel_bench file run with DFSEL_BENCH_REPLAYS=10 holds the step's rows: the
    pictures keep the one-replay figures."""
    for folder in ("bench/results", "bench/python/results"):
        shutil.copytree(os.path.join(ROOT, folder), str(tmp_path / folder))
    before = {x["figure"]: x for x in make_figures.describe(str(tmp_path))["NVIDIA H200"]}["step-scaling"]
    line = next(s for p in before["panels"] for s in p["series"] if s["id"] == "step:dfsel")
    steady = {"context": {"date": "2026-12-09T10:00:00+00:00", "gpu": "NVIDIA H200", "replays_per_timing": "10"},
              "benchmarks": [{"name": pt["from"]["row"], "run_name": pt["from"]["row"], "run_type": "iteration",
                              "real_time": 1.0, "time_unit": "us", "iterations": 1} for pt in line["points"]]}
    (tmp_path / "bench/results/h200-2026-12-09-steady.json").write_text(json.dumps(steady))
    after = {x["figure"]: x for x in make_figures.describe(str(tmp_path))["NVIDIA H200"]}["step-scaling"]
    assert after == before
    steady["context"]["replays_per_timing"] = "1"  # the same file timed as the others is drawn
    (tmp_path / "bench/results/h200-2026-12-09-steady.json").write_text(json.dumps(steady))
    drawn = {x["figure"]: x for x in make_figures.describe(str(tmp_path))["NVIDIA H200"]}["step-scaling"]
    line = next(s for p in drawn["panels"] for s in p["series"] if s["id"] == "step:dfsel")
    assert {pt["value"] for pt in line["points"]} == {1.0}


GGML_PEER = {1: 710.0, 4: 900.0, 16: 1600.0, 64: 4800.0}  # InGraphSelector's median_us by blocks
GGML_PATCHED = {1: 142.0, 4: 200.0, 16: 400.0, 64: 1600.0}  # InGraphSelector/ggml:dfsel-topk's
GGML_EAGER = {1: 10.0, 4: 15.0, 16: 40.0, 64: 120.0}  # DfselGgml/eager's
GGML_ROWS = {"InGraphSelector": GGML_PEER, "InGraphSelector/ggml:dfsel-topk": GGML_PATCHED,
             "DfselGgml/eager": GGML_EAGER,
             "DfselGgml/graph": {b: v - 2.0 for b, v in GGML_EAGER.items()},
             "DfselGgml/replayed": {b: v - 5.0 for b, v in GGML_EAGER.items()}}
GGML_PEER_TEXT = "llama.cpp's in-graph selector (build_dflash2_selector ops) on ggml-cuda"


def ggml_row(name, blocks, median_us):
    """One dfsel_ggml_bench row as Google Benchmark writes it: the mean in real_time (5 us above
    the median here, so that the two are told apart), the median in the counter median_us."""
    full = "%s/blocks:%d/manual_time" % (name, blocks)
    return {"name": full, "family_index": 0, "per_family_instance_index": 0, "run_name": full, "run_type": "iteration",
            "repetitions": 1, "repetition_index": 0, "threads": 1, "iterations": 200, "real_time": median_us + 5.0,
            "cpu_time": median_us + 4.0, "time_unit": "us", "median_us": median_us, "tokens": 16.0 * blocks}


GGML_FAMILIES = ("InGraphSelector", "DfselGgml", "DfselParts", "DfselTimeline", "GgmlTopK")


def copy_results_without_ggml(tmp_path):
    """A copy of the results without the recorded dfsel_ggml_bench and ggml TOP_K files (any file
    with a row of those families), so that a test's own files are the only ones the ggml-cuda and
    ggml-topk pictures read."""
    copy_results(tmp_path)
    folder = tmp_path / "bench" / "results"
    for name in os.listdir(str(folder)):
        if not name.endswith(".json"):
            continue
        with open(str(folder / name)) as f:
            data = json.load(f)
        if isinstance(data, dict) and any(b.get("name", "").split("/")[0] in GGML_FAMILIES
                                          for b in data.get("benchmarks", [])):
            os.remove(str(folder / name))


def write_ggml_file(tmp_path, rows, date="2026-12-09T10:00:00+00:00", name="h200-2026-12-09-ggml-cuda.json",
                    with_command=True):
    """A dfsel_ggml_bench file in a copy of the results: rows is {name: {blocks: median_us}}; a
    median of None leaves the counter out (the row has its real_time only)."""
    ctx = {"date": date, "host_name": "h200", "executable": "./build/bench/dfsel_ggml_bench", "num_cpus": 16,
           "library_build_type": "release", "gpu": "NVIDIA H200", "sms": "132", "replays_per_timing": "1",
           "peer": GGML_PEER_TEXT,
           "command": "dfsel_ggml_bench --benchmark_out=bench/results/%s --benchmark_out_format=json" % name}
    if not with_command:
        del ctx["command"]
    bench = []
    for n, by_blocks in rows.items():
        for b, v in sorted(by_blocks.items()):
            row = ggml_row(n, b, 28.0 if v is None else v)
            if v is None:
                del row["median_us"]  # real_time (the mean), 33 us, is all the row has
            bench.append(row)
    (tmp_path / "bench/results" / name).write_text(json.dumps({"context": ctx, "benchmarks": bench}))
    return "bench/results/" + name, ctx.get("command")


def ggml_figure(root):
    return {x["figure"]: x for x in make_figures.describe(str(root))["NVIDIA H200"]}["ggml-cuda"]


def ggml_series(desc):
    return {s["id"]: s for s in desc["panels"][0]["series"]}


def drawn_ratios(fig, prefix="ratio:"):
    """gid -> (text, where it points) of the drawn ratios (patched-ratio:: the patched series'
    over the peer's)."""
    return {a.get_gid(): (a.get_text(), tuple(a.xy))
            for a in fig.findobj(lambda a: (a.get_gid() or "").startswith(prefix))}


def test_ggml_cuda_is_drawn_from_the_median_counter(tmp_path):
    """A dfsel_ggml_bench file at 1, 4, 16 and 64 blocks dropped into a copy of the results: the
    four lines are its median_us counters at 16 x blocks tokens, each naming its file, row and
    field; the ratios are llama.cpp's over dfsel's between graph computes; nothing is missing."""
    copy_results_without_ggml(tmp_path)
    rel, command = write_ggml_file(tmp_path, GGML_ROWS)
    d = ggml_figure(tmp_path)
    series = ggml_series(d)
    assert list(series) == ["ggml:peer", "ggml:patched", "ggml:eager", "ggml:graph", "ggml:replayed"]
    for sid, name in zip(series, GGML_ROWS):
        s = series[sid]
        assert s["style"] == "line" and s["row"] == name
        assert [(pt["blocks"], pt["x"], pt["value"]) for pt in s["points"]] == \
            [(b, 16 * b, v) for b, v in sorted(GGML_ROWS[name].items())]
        for pt in s["points"]:
            assert pt["from"] == {"file": rel, "row": "%s/blocks:%d/manual_time" % (name, pt["blocks"]),
                                  "field": "median_us", "kind": "gbench"}
            assert raw_value(pt["from"], str(tmp_path)) == pt["value"]
    panel = d["panels"][0]
    assert [(r["blocks"], r["x"], r["label"]) for r in panel["ratios"]] == \
        [(1, 16, "71x"), (4, 64, "60x"), (16, 256, "40x"), (64, 1024, "40x")]
    assert [r["value"] for r in panel["ratios"]] == pytest.approx([71.0, 60.0, 40.0, 40.0])
    assert [(r["blocks"], r["x"], r["label"]) for r in panel["patched_ratios"]] == \
        [(1, 16, "5.0x faster"), (4, 64, "4.5x faster"), (16, 256, "4.0x faster"), (64, 1024, "3.0x faster")]
    assert all(r["of"] == ["ggml:peer", "ggml:patched"] for r in panel["patched_ratios"])
    assert [r["value"] for r in panel["patched_ratios"]] == pytest.approx([5.0, 4.5, 4.0, 3.0])
    assert panel["peer"] == GGML_PEER_TEXT
    assert d["missing"] == [] and panel["notes"] == []
    assert d["sources"] == [{"file": rel, "date": "2026-12-09 10:00 UTC", "command": command}]
    assert d["title"].startswith("llama.cpp's in-graph selector on ggml-cuda vs dfsel")

    fig = figures.draw(d)
    drawn = drawn_values(fig)
    for sid, s in series.items():
        assert drawn["series:" + sid] == ([16, 64, 256, 1024], [pt["value"] for pt in s["points"]])
    assert drawn_ratios(fig) == {"ratio:%d" % b: (lab, (16 * b, GGML_EAGER[b]))
                                 for b, lab in ((1, "71x"), (4, "60x"), (16, "40x"), (64, "40x"))}
    assert drawn_ratios(fig, "patched-ratio:") == {
        "patched-ratio:%d" % b: (lab, (16 * b, GGML_PATCHED[b]))
        for b, lab in ((1, "5.0x faster"), (4, "4.5x faster"), (16, "4.0x faster"), (64, "3.0x faster"))}
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert fig.texts[0].get_text().endswith("(NVIDIA H200)")
    assert any(command in t.get_text() for t in fig.texts)  # the footer names the file's command

    assert make_figures.main(["--root", str(tmp_path), "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "h200" / "ggml-cuda.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "figs" / "h200" / "ggml-cuda.json").read_text()) == json.loads(json.dumps(d))


def test_ggml_cuda_rows_missing_in_part(tmp_path):
    """A file without the CUDA-graph rows, without llama.cpp's at 64 blocks, and whose dfsel row
    at 4 blocks has no median_us: that row's real_time is drawn and named, a ratio is drawn only
    where both rows are, and what is missing is listed."""
    copy_results_without_ggml(tmp_path)
    rows = {"InGraphSelector": {b: v for b, v in GGML_PEER.items() if b != 64},
            "DfselGgml/eager": {**GGML_EAGER, 4: None},
            "DfselGgml/replayed": GGML_ROWS["DfselGgml/replayed"]}
    rel, _ = write_ggml_file(tmp_path, rows)
    d = ggml_figure(tmp_path)
    series = ggml_series(d)
    eager = series["ggml:eager"]["points"]
    assert [(pt["blocks"], pt["value"], pt["from"]["field"]) for pt in eager] == \
        [(1, 10.0, "median_us"), (4, 33.0, "real_time"), (16, 40.0, "median_us"), (64, 120.0, "median_us")]
    assert raw_value(eager[1]["from"], str(tmp_path)) == 33.0
    assert series["ggml:graph"]["points"] == []
    assert [pt["blocks"] for pt in series["ggml:peer"]["points"]] == [1, 4, 16]
    assert [(r["blocks"], r["label"]) for r in d["panels"][0]["ratios"]] == [(1, "71x"), (4, "27x"), (16, "40x")]
    assert d["panels"][0]["ratios"][1]["value"] == pytest.approx(900.0 / 33.0)
    assert d["missing"] == ["InGraphSelector at 64 blocks (the newest rows measure 1, 4, 16)",
                            "InGraphSelector/ggml:dfsel-topk (no InGraphSelector/ggml:dfsel-topk/blocks:N row in any "
                            "result JSON)",
                            "DfselGgml/graph (no DfselGgml/graph/blocks:N row in any result JSON)"]
    assert series["ggml:patched"]["points"] == [] and d["panels"][0]["patched_ratios"] == []
    fig = figures.draw(d)
    assert "series:ggml:graph" not in drawn_values(fig)
    assert sorted(drawn_ratios(fig)) == ["ratio:1", "ratio:16", "ratio:4"]
    assert any("InGraphSelector at 64 blocks" in t.get_text() for t in fig.texts)


def test_ggml_cuda_takes_each_row_from_the_newest_file(tmp_path):
    """A later file with dfsel's rows between graph computes only: those come from it, llama.cpp's
    from the earlier file, the ratios from both, and the footer names both, the newest first."""
    copy_results_without_ggml(tmp_path)
    old, _ = write_ggml_file(tmp_path, GGML_ROWS)
    new, command = write_ggml_file(tmp_path, {"DfselGgml/eager": {b: v / 2 for b, v in GGML_EAGER.items()}},
                                   date="2026-12-10T10:00:00+00:00", name="h200-2026-12-10-ggml-cuda.json")
    d = ggml_figure(tmp_path)
    series = ggml_series(d)
    assert {pt["from"]["file"] for pt in series["ggml:eager"]["points"]} == {new}
    assert {pt["from"]["file"] for pt in series["ggml:peer"]["points"]} == {old}
    assert [r["label"] for r in d["panels"][0]["ratios"]] == ["142x", "120x", "80x", "80x"]
    assert [s["file"] for s in d["sources"]] == [new, old] and d["sources"][0]["command"] == command


def test_ggml_cuda_without_rows_says_so(tmp_path, descs):
    """Results that hold no dfsel_ggml_bench row: the picture is drawn with no line, no
    file read and the rows named as missing; the other pictures are as they were, and the command
    still succeeds."""
    copy_results_without_ggml(tmp_path)
    figs = {x["figure"]: x for x in make_figures.describe(str(tmp_path))["NVIDIA H200"]}
    d = figs["ggml-cuda"]
    assert all(s["points"] == [] for s in d["panels"][0]["series"])
    assert d["panels"][0]["ratios"] == d["panels"][0]["patched_ratios"] == [] and d["panels"][0]["peer"] is None
    assert d["sources"] == []
    want = "InGraphSelector and DfselGgml rows (dfsel_ggml_bench): no such row in any result JSON for this GPU"
    assert d["missing"] == [want]
    assert d["panels"][0]["notes"] == ["not recorded: InGraphSelector and DfselGgml rows (dfsel_ggml_bench)"]
    committed = {x["figure"]: x for x in descs["NVIDIA H200"]}
    for name in EXPECTED:
        if name not in ("ggml-cuda", "ggml-topk"):
            assert figs[name] == committed[name], name
    fig = figures.draw(d)
    assert drawn_values(fig) == {} and drawn_ratios(fig) == {} and drawn_ratios(fig, "patched-ratio:") == {}
    assert any("no InGraphSelector or DfselGgml row recorded" in t.get_text() for a in fig.axes for t in a.texts)
    assert any(want in t.get_text() for t in fig.texts)
    assert make_figures.main(["--root", str(tmp_path), "--out", str(tmp_path / "figs")]) == 0
    assert json.loads((tmp_path / "figs" / "h200" / "ggml-cuda.json").read_text())["missing"] == [want]


def test_ggml_cuda_command_from_the_readme(tmp_path):
    """A dfsel_ggml_bench file that does not record its command: the footer quotes the command
    bench/results/README.md gives beside the file's name."""
    copy_results_without_ggml(tmp_path)
    rel, _ = write_ggml_file(tmp_path, GGML_ROWS, with_command=False)
    command = "./build/bench/dfsel_ggml_bench --benchmark_min_time=0.05s"
    with open(tmp_path / "bench/results/README.md", "a") as f:
        f.write("\n\n`%s`: llama.cpp's in-graph selector and dfsel on ggml-cuda, by blocks, from the\n"
                "`dfsel_ggml_bench` of this commit; command\n\n`%s`\n" % (os.path.basename(rel), command))
    d = ggml_figure(tmp_path)
    assert d["sources"] == [{"file": rel, "date": "2026-12-09 10:00 UTC", "command": command}]


def test_ggml_cuda_patched_series_is_read_from_the_labelled_rows(tmp_path):
    """dfsel_ggml_bench run on the patched ggml-cuda (DFSEL_GGML_LABEL=dfsel-topk) writes only
    InGraphSelector/ggml:dfsel-topk/blocks:N rows, in a file of its own, newer than the run on
    ggml-cuda as it is and at 1 and 16 blocks only: they are the patched series and never the
    peer's, whose points stay the unlabelled rows of the older file; the patched series' speed-up
    over the peer is worked out where both are, and the blocks it lacks are listed."""
    copy_results_without_ggml(tmp_path)
    old, _ = write_ggml_file(tmp_path, {n: v for n, v in GGML_ROWS.items() if n != "InGraphSelector/ggml:dfsel-topk"})
    patched = {1: 142.0, 16: 400.0}
    new, command = write_ggml_file(tmp_path, {"InGraphSelector/ggml:dfsel-topk": patched},
                                   date="2026-12-10T10:00:00+00:00", name="h200-2026-12-10-ggml-topk-patched.json")
    d = ggml_figure(tmp_path)
    series = ggml_series(d)
    peer, mine = series["ggml:peer"], series["ggml:patched"]
    assert peer["row"] == "InGraphSelector" and mine["row"] == "InGraphSelector/ggml:dfsel-topk"
    assert mine["style"] == "line" and mine["label"].startswith("llama.cpp's in-graph selector, ggml-cuda's TOP_K")
    assert [(pt["blocks"], pt["x"], pt["value"]) for pt in mine["points"]] == [(1, 16, 142.0), (16, 256, 400.0)]
    for pt in mine["points"]:
        row = "InGraphSelector/ggml:dfsel-topk/blocks:%d/manual_time" % pt["blocks"]
        assert pt["from"] == {"file": new, "row": row, "field": "median_us", "kind": "gbench"}
        assert raw_value(pt["from"], str(tmp_path)) == pt["value"]
    assert [(pt["blocks"], pt["value"]) for pt in peer["points"]] == sorted(GGML_PEER.items())
    assert {pt["from"]["file"] for pt in peer["points"]} == {old}
    assert {pt["from"]["row"] for pt in peer["points"]} == \
        {"InGraphSelector/blocks:%d/manual_time" % b for b in GGML_PEER}
    panel = d["panels"][0]
    assert [(r["blocks"], r["label"]) for r in panel["ratios"]] == [(1, "71x"), (4, "60x"), (16, "40x"), (64, "40x")]
    assert [(r["blocks"], r["x"], r["label"]) for r in panel["patched_ratios"]] == \
        [(1, 16, "5.0x faster"), (16, 256, "4.0x faster")]
    assert d["missing"] == ["InGraphSelector/ggml:dfsel-topk at 4, 64 blocks (the newest rows measure 1, 16)"]
    assert [s["file"] for s in d["sources"]] == [new, old] and d["sources"][0]["command"] == command

    fig = figures.draw(d)
    drawn = drawn_values(fig)
    assert drawn["series:ggml:patched"] == ([16, 256], [142.0, 400.0])
    assert drawn["series:ggml:peer"] == ([16, 64, 256, 1024], [GGML_PEER[b] for b in (1, 4, 16, 64)])
    assert drawn_ratios(fig, "patched-ratio:") == {"patched-ratio:1": ("5.0x faster", (16, 142.0)),
                                                   "patched-ratio:16": ("4.0x faster", (256, 400.0))}
    assert sorted(drawn_ratios(fig)) == ["ratio:1", "ratio:16", "ratio:4", "ratio:64"]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[:2] == [peer["label"], mine["label"]]


def test_ggml_cuda_labelled_rows_alone_are_no_peer(tmp_path):
    """A file with the patched ggml-cuda's rows and dfsel's, but no unlabelled InGraphSelector
    row: the peer has no point (a labelled row is not the peer's), no ratio is worked out, and
    llama.cpp's rows on ggml-cuda as it is are listed as missing. A row whose label is another
    one's (ggml:other) is in neither series."""
    copy_results_without_ggml(tmp_path)
    write_ggml_file(tmp_path, {"InGraphSelector/ggml:dfsel-topk": GGML_PATCHED, "InGraphSelector/ggml:other": GGML_PEER,
                               "DfselGgml/eager": GGML_EAGER})
    d = ggml_figure(tmp_path)
    series = ggml_series(d)
    assert series["ggml:peer"]["points"] == []
    assert [pt["value"] for pt in series["ggml:patched"]["points"]] == [GGML_PATCHED[b] for b in (1, 4, 16, 64)]
    assert all("ggml:other" not in pt["from"]["row"] for s in series.values() for pt in s["points"])
    assert d["panels"][0]["ratios"] == d["panels"][0]["patched_ratios"] == []
    assert "InGraphSelector (no InGraphSelector/blocks:N row in any result JSON)" in d["missing"]
    assert drawn_ratios(figures.draw(d), "patched-ratio:") == {}


TOPK_CASES = {  # (cols, rows, k): (us a run as it is, with dfsel's top-K): test-backend-ops perf's cases, in part
    (248320, 16, 16): (310.0, 21.5), (248320, 1, 64): (95.0, 9.25), (2, 1, 1): (4.5, 4.75),
    (151936, 256, 8): (2900.0, 160.0), (200000, 16, 400): (260.0, 262.0), (1000, 16, 10): (12.0, 6.0),
    (65000, 1, 40): (40.0, 8.5), (248320, 16, 1): (305.0, 18.0), (151936, 1, 40): (60.0, 7.5),
}


def perf_log(path, times):
    """A test-backend-ops perf log of TOP_K's cases, as it prints them."""
    with open(str(path), "w") as f:
        f.write("Backend 1/2: CUDA0\n  Device description: NVIDIA H200\n")
        for (cols, rows, k), us in times.items():
            f.write("  TOP_K(type=f32,ne=[%d,%d,1,1],k=%d,ties=0):   %8d runs - %8.2f us/run -    %d kB/run -  "
                    "1.00 GB/s\n" % (cols, rows, k, 4096, us, cols * rows * 4 // 1024))
        f.write("  Backend CUDA0: OK\n")


def write_topk_file(tmp_path, cases, date="2026-12-09T12:00:00+00:00", name="h200-2026-12-09-ggml-topk-perf.json",
                    gpu="NVIDIA H200, 570.86.15", drop=()):
    """bench/ggml/topk_perf_table.py's JSON of two perf logs (cases: {(cols, rows, k): (unpatched,
    patched)}), made by the script itself, its date set; drop: row names taken out after."""
    logs = {}
    for i, build in enumerate(("unpatched", "patched")):
        logs[build] = tmp_path / ("%s-%s.log" % (name, build))
        perf_log(logs[build], {c: us[i] for c, us in cases.items()})
    out = tmp_path / "bench/results" / name
    command = "scripts/ggml-topk-gpu-check.sh --stages test,perf,bench"
    subprocess.run([sys.executable, os.path.join(ROOT, "bench/ggml/topk_perf_table.py"), str(logs["unpatched"]),
                    str(logs["patched"]), "--gpu", gpu, "--command", command, "--json", str(out)], check=True,
                   capture_output=True)
    data = json.loads(out.read_text())
    data["context"]["date"] = date
    data["benchmarks"] = [b for b in data["benchmarks"] if b["name"] not in drop]
    out.write_text(json.dumps(data))
    return "bench/results/" + name, command


def topk_name(build, cols, rows, k):
    return "GgmlTopK/ggml_cuda:%s/cols:%d/rows:%d/k:%d" % (build, cols, rows, k)


def topk_figure(root, gpu="NVIDIA H200"):
    return {x["figure"]: x for x in make_figures.describe(str(root))[gpu]}["ggml-topk"]


def test_ggml_topk_bars_are_the_json_values(tmp_path):
    """A topk_perf_table.py file dropped into a copy of the results: a bar a build for every case
    of 100000 columns or more whose rows both builds have, ordered by columns, rows and k, each the
    row's real_time in us with its file, row and field; the k <= 64 cases marked as dfsel's path;
    the narrower cases counted and left out; a case one build lacks is listed as missing."""
    copy_results_without_ggml(tmp_path)
    lacking = topk_name("patched", 248320, 16, 1)
    rel, command = write_topk_file(tmp_path, TOPK_CASES, drop=(lacking,))
    d = topk_figure(tmp_path)
    p = d["panels"][0]
    drawn_cases = [(151936, 1, 40), (151936, 256, 8), (200000, 16, 400), (248320, 1, 64), (248320, 16, 16)]
    assert p["categories"] == ["%dx%d\nk %d" % c for c in drawn_cases]
    assert [(c["cols"], c["rows"], c["k"], c["path"]) for c in p["cases"]] == \
        [c + ("ggml-cuda" if c[2] > 64 else "dfsel",) for c in drawn_cases]
    assert [s["id"] for s in p["series"]] == ["ggml-topk:unpatched", "ggml-topk:patched"]
    for i, s in enumerate(p["series"]):
        build = s["id"].split(":")[1]
        assert s["style"] == "bar"
        assert [(pt["key"], pt["value"]) for pt in s["points"]] == \
            [(key, TOPK_CASES[c][i]) for key, c in zip(p["categories"], drawn_cases)]
        for pt, c in zip(s["points"], drawn_cases):
            assert pt["from"] == {"file": rel, "row": topk_name(build, *c), "field": "real_time", "kind": "gbench"}
            assert raw_value(pt["from"], str(tmp_path)) == pt["value"]
    assert p["left_out"] == 3
    assert p["notes"] == ["3 cases with fewer than 100000 columns not drawn (every case: the table of ggml-cuda's "
                          "TOP_K in bench/results/README.md, and the file below)"]
    assert d["missing"] == [lacking + " (the unpatched row is recorded, not this one)"]
    assert d["sources"] == [{"file": rel, "date": "2026-12-09 12:00 UTC", "command": command}]

    fig = figures.draw(d)
    drawn = drawn_values(fig)
    for s in p["series"]:
        assert [drawn["series:%s:%d" % (s["id"], i)][2] for i in range(len(s["points"]))] == \
            pytest.approx([pt["value"] for pt in s["points"]])
    assert len(drawn) == 2 * len(drawn_cases)
    assert len(fig.axes) == 3  # a row of the picture a column count
    assert all(ax.get_yscale() == "log" for ax in fig.axes)
    ticks = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels()]
    assert ticks[0] == "151936x1\nk 40\n8.0x" and ticks[2] == "200000x16\nk 400\n1.0x"
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert all(figures._fmt(v) in texts for v in (310.0, 21.5, 2900.0, 160.0, 9.25))  # each bar's value
    assert any(p["notes"][0] in t for t in texts)
    assert any(command in t.get_text() for t in fig.texts)

    assert make_figures.main(["--root", str(tmp_path), "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "h200" / "ggml-topk.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "figs" / "h200" / "ggml-topk.json").read_text()) == json.loads(json.dumps(d))


def test_ggml_topk_takes_each_row_from_the_newest_file(tmp_path):
    """A later file with two of the cases: those bars come from it, the others from the earlier
    file, and the footer names both, the newest first."""
    copy_results_without_ggml(tmp_path)
    old, _ = write_topk_file(tmp_path, TOPK_CASES)
    later = {(248320, 16, 16): (300.0, 17.25), (151936, 256, 8): (2800.0, 150.0)}
    new, _ = write_topk_file(tmp_path, later, date="2026-12-10T12:00:00+00:00",
                             name="h200-2026-12-10-ggml-topk-perf.json")
    d = topk_figure(tmp_path)
    p = d["panels"][0]
    assert len(p["categories"]) == 6
    for i, s in enumerate(p["series"]):
        for pt, c in zip(s["points"], p["cases"]):
            case = (c["cols"], c["rows"], c["k"])
            assert pt["value"] == (later if case in later else TOPK_CASES)[case][i]
            assert pt["from"]["file"] == (new if case in later else old)
            assert raw_value(pt["from"], str(tmp_path)) == pt["value"]
    assert [s["file"] for s in d["sources"]] == [new, old]
    assert d["missing"] == []


def test_ggml_topk_without_rows_says_so(tmp_path):
    """No GgmlTopK row for the H200, but an H100's file with them: the H200's picture has no bar,
    reads no file and says what is missing, while the H100's draws its rows; the command succeeds."""
    copy_results_without_ggml(tmp_path)
    rel, _ = write_topk_file(tmp_path, TOPK_CASES, name="h100-2026-12-09-ggml-topk-perf.json",
                             gpu="NVIDIA H100 80GB HBM3, 570.86.15")
    d = topk_figure(tmp_path)
    assert all(s["points"] == [] for s in d["panels"][0]["series"]) and d["sources"] == []
    want = ("GgmlTopK rows (bench/ggml/topk_perf_table.py --json, scripts/ggml-topk-gpu-check.sh's perf stage): "
            "no such row in any result JSON for this GPU")
    assert d["missing"] == [want]
    assert d["panels"][0]["notes"] == ["not recorded: " + want.split(": no such row")[0]]
    fig = figures.draw(d)
    assert drawn_values(fig) == {}
    assert any("no GgmlTopK row recorded for this GPU" in t.get_text() for a in fig.axes for t in a.texts)
    assert any(want in t.get_text() for t in fig.texts)
    h100 = topk_figure(tmp_path, "NVIDIA H100 80GB HBM3")
    assert len(h100["panels"][0]["categories"]) == 6 and h100["missing"] == []
    assert {pt["from"]["file"] for s in h100["panels"][0]["series"] for pt in s["points"]} == {rel}
    assert make_figures.main(["--root", str(tmp_path), "--out", str(tmp_path / "figs")]) == 0
    assert json.loads((tmp_path / "figs" / "h200" / "ggml-topk.json").read_text())["missing"] == [want]
    assert (tmp_path / "figs" / "h100-80gb-hbm3" / "ggml-topk.png").stat().st_size > 10_000
