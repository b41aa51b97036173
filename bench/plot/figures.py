"""What each picture shows, as data: build_*(index) returns a figure description whose series
hold every plotted value with the file, row and field it was read from (written beside the PNG
as JSON); draw() turns a description into a matplotlib figure, tagging each drawn artist with
its series (gid "series:<id>", bars "series:<id>:<i>") so that the numbers can be read back
from the figure itself.

Series styles: bar (one bar a point), span (a bar from the point 'start' to the point 'end'),
line (points x, value), hline (one value across the panel), vline (one value down the panel).
A panel's ratios (ggml-cuda: the peer over dfsel at each block count) are worked out from two of
its plotted points, so they carry no file of their own; each is drawn as a text with gid
"ratio:<blocks>". So are its patched ratios (the peer over the in-graph selector on ggml-cuda
patched with dfsel's top-K), gid "patched-ratio:<blocks>", and ggml-topk's build-over-build
ratios under each case.
"""
import re
import textwrap

import results

STEP_VOCAB = 248320  # the sizes of the README's step: V 248320, K 16, block 16, F32 logits
BLOCK = 16
KERNELS = ("topk", "gate", "records", "agree", "exchange", "lattice")
KERNEL_LABELS = {"topk": "top-K", "gate": "gate", "records": "records", "agree": "inputs check",
                 "exchange": "exchange", "lattice": "lattice"}
KERNEL_COLORS = {"topk": "#1f77b4", "gate": "#ff7f0e", "records": "#9467bd", "agree": "#e377c2",
                 "exchange": "#8c564b", "lattice": "#2ca02c"}
TIMELINE_CASES = ((1, None), (2, "replicated"), (2, "sharded"))
TIMELINE_TOKENS = (16, 256)
DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def _case_name(ranks, placement, tokens):
    n = "StepTimeline/" + ("ranks:%d/" % ranks if ranks > 1 else "")
    n += "tokens:%d/vocab:%d/k:16/f32/bf16" % (tokens, STEP_VOCAB)
    return n + ("/" + placement if placement else "")


def _expected_kernels(ranks, placement):
    if ranks == 1:
        return ["topk", "gate", "lattice"]  # one rank exchanges nothing
    return ["topk", "gate"] + (["records"] if placement == "sharded" else []) + ["agree", "exchange", "lattice"]


def _traced_spans(fields, ranks):
    """{(part, rank): field prefix} of a StepTimeline row: <part>_start/_end on one rank,
    <part>_r<i>_start/_end on S simulated ranks."""
    out = {}
    for k in fields:
        m = re.fullmatch(r"([a-z]+)(?:_r(\d+))?_start", k)
        if not m or k[:-6] + "_end" not in fields or (m.group(2) is None) != (ranks == 1):
            continue
        out[(m.group(1), int(m.group(2) or 0))] = k[:-6]
    return out


def _point(key, value, where):
    return {"key": key, "value": value, "from": where}


class _Figure:
    def __init__(self, name, title, gpu):
        self.d = {"figure": name, "title": title, "gpu": gpu, "panels": [], "missing": [], "sources": []}

    def panel(self, **kw):
        p = dict(kw, series=[])
        self.d["panels"].append(p)
        return p

    def done(self, index):
        """Lists the files the series were read from, with their dates and commands."""
        used = []
        for p in self.d["panels"]:
            for s in p["series"]:
                for pt in s["points"]:
                    if pt["from"]["file"] not in used:
                        used.append(pt["from"]["file"])
        srcs = [index.source(rel) for rel in used]
        srcs.sort(key=lambda s: s.order, reverse=True)
        self.d["sources"] = [{"file": s.rel, "date": s.when(), "command": s.command} for s in srcs]
        return self.d


def build_timeline(index):
    f = _Figure("step-timeline", "Where a selector step's time goes: its kernels on the GPU (StepTimeline, CUPTI trace)",
                index.gpu)
    names = {}
    for n in index.names("StepTimeline"):
        fam, params, flags = results.parse_name(n)
        if params.get("vocab") != STEP_VOCAB or "all_outputs" in flags or flags[:1] != ("f32",):
            continue
        placement = next((p for p in ("replicated", "sharded") if p in flags), None)
        names[(params.get("ranks", 1), placement, params.get("tokens"))] = n
    for ranks, placement in TIMELINE_CASES:
        for tokens in TIMELINE_TOKENS:
            blocks = tokens // BLOCK
            title = "%d block%s (%d tokens), %s" % (blocks, "" if blocks == 1 else "s", tokens,
                                                    "1 rank" if ranks == 1 else "%d simulated ranks, %s codebooks" % (
                                                        ranks, placement))
            p = f.panel(title=title, case=_case_name(ranks, placement, tokens), ranks=ranks, placement=placement,
                        tokens=tokens, lanes=[], notes=[])
            name = names.get((ranks, placement, tokens))
            fields, src = index.row(name, "step") if name else (None, None)
            if fields is None:
                f.d["missing"].append("%s (not in any recorded JSON)" % p["case"])
                p["notes"].append("not recorded: %s" % p["case"])
                continue
            spans = _traced_spans(fields, ranks)
            traced = sorted({part for part, _ in spans})
            expected = _expected_kernels(ranks, placement)
            p["lanes"] = [k for k in KERNELS if k in expected or k in traced] + [k for k in traced if k not in KERNELS]
            for (part, rank), prefix in sorted(spans.items(), key=lambda kv: (p["lanes"].index(kv[0][0]), kv[0][1])):
                pts = [_point(end, fields[prefix + "_" + end], results.field_path(src, name, prefix + "_" + end))
                       for end in ("start", "end")]
                sid = "%s:%s" % (p["case"], part) + (":r%d" % rank if ranks > 1 else "")
                p["series"].append({"id": sid, "label": KERNEL_LABELS.get(part, part), "style": "span", "lane": part,
                                    "rank": rank, "points": pts})
            p["series"].append({"id": "%s:step" % p["case"], "label": "step", "style": "vline",
                                "points": [_point("step", fields["step"], results.field_path(src, name, "step"))]})
            absent = [k for k in expected if any((k, r) not in spans for r in range(ranks))]
            if absent:
                p["notes"].append("not in the trace: " + ", ".join(KERNEL_LABELS.get(k, k) for k in absent))
                f.d["missing"].append("%s: kernels %s not traced" % (p["case"], ", ".join(absent)))
    return f.done(index)


def _topk_shapes(index):
    shapes = []
    for n in index.names("ShardTopK"):
        fam, params, flags = results.parse_name(n)
        if not flags or flags[0] not in DTYPE_BYTES or "tokens" not in params or "vocab" not in params:
            continue
        shapes.append((params["tokens"], params["vocab"], flags[0] != "f32", params.get("k", 16) != 16,
                       params.get("k", 16), flags[0], n))
    shapes.sort()
    return shapes


def _floor_name(index, tokens, row_bytes):
    """The ReadFloor row that reads the same bytes: a BF16 row of V is an F32 row of V / 2."""
    for n in index.names("ReadFloor"):
        fam, params, flags = results.parse_name(n)
        if params.get("tokens") == tokens and flags[:1] in (("f32",), ("bf16",)) and \
                params.get("vocab", 0) * DTYPE_BYTES[flags[0]] == row_bytes:
            return n
    return None


def _torch_topk_name(index, params, dtype):
    for n in index.names("TorchTopK"):
        fam, p, flags = results.parse_name(n)
        if p.get("tokens") == params["tokens"] and p.get("vocab") == params["vocab"] and \
                p.get("k", 16) == params.get("k", 16) and flags[:1] == (dtype,):
            return n
    return None


def build_topk(index):
    f = _Figure("topk-floor", "The top-K of each shape against its ReadFloor (the best plain read of the same bytes)",
                index.gpu)
    p = f.panel(title="ShardTopK, one launch a shard, graph replay", categories=[], notes=[])
    dfsel, floor, torch = ([], [], [])
    for tokens, vocab, _, _, k, dtype, name in _topk_shapes(index):
        value, where = index.lookup(name)
        if value is None:
            continue
        cat = "%d x %d\n%s, K %d" % (tokens, vocab, dtype.upper(), k)
        p["categories"].append(cat)
        dfsel.append(_point(cat, value, where))
        fl = _floor_name(index, tokens, vocab * DTYPE_BYTES[dtype])
        fv, fw = index.lookup(fl) if fl else (None, None)
        if fv is not None:
            floor.append(_point(cat, fv, fw))
        else:
            f.d["missing"].append("ReadFloor for %s" % name)
        tn = _torch_topk_name(index, {"tokens": tokens, "vocab": vocab, "k": k}, dtype)
        tv, tw = index.lookup(tn) if tn else (None, None)
        if tv is not None:
            torch.append(_point(cat, tv, tw))
    p["series"] = [{"id": "topk:dfsel", "label": "dfsel ShardTopK", "style": "bar", "points": dfsel},
                   {"id": "topk:floor", "label": "ReadFloor (same bytes)", "style": "bar", "points": floor}]
    if torch:
        p["series"].append({"id": "topk:torch", "label": "torch.topk, sorted (bench_topk.py)", "style": "bar",
                            "points": torch})
    else:
        p["notes"].append("torch.topk: no figure recorded in a result JSON (TorchTopK rows)")
        f.d["missing"].append("torch.topk (no TorchTopK row in any result JSON)")
    no_floor = [pt["key"].replace("\n", " ") for pt in dfsel if pt["key"] not in {q["key"] for q in floor}]
    if no_floor:
        p["notes"].append("no ReadFloor recorded for " + "; ".join(no_floor))
    return f.done(index)


def _blocks_series(index, family, want, blocks_of):
    """Points (blocks, time) of the rows of a family that want(params, flags) accepts."""
    pts = []
    for n in index.names(family):
        fam, params, flags = results.parse_name(n)
        if want(params, flags):
            v, w = index.lookup(n)
            if v is not None:
                pts.append((blocks_of(params), v, w, n))
    pts.sort(key=lambda t: t[0])
    return pts


def _line(sid, label, pts, **extra):
    return dict({"id": sid, "label": label, "style": "line",
                 "points": [dict(_point(b, v, w), x=b) for b, v, w, _ in pts]}, **extra)


def build_scaling(index):
    f = _Figure("step-scaling", "The step and the DSpark chain by blocks, against their floors and PyTorch", index.gpu)
    # DFlash2 step: one rank, the path only, F32 logits.
    left = f.panel(title="DFlash2 selector step, V %d, K 16, block 16, F32 logits" % STEP_VOCAB, notes=[],
                   xlabel="blocks of 16 tokens")
    step = _blocks_series(index, "SelectorStep",
                          lambda p, fl: p.get("vocab") == STEP_VOCAB and "ranks" not in p and fl == ("f32", "bf16"),
                          lambda p: p["tokens"] // BLOCK)
    left["series"].append(_line("step:dfsel", "dfsel SelectorStep (1 GPU)", step))
    floor = []
    for b, _, _, n in step:
        v, w = index.lookup(n, "floor_us")
        if v is not None:
            floor.append((b, v, w, n))
    left["series"].append(_line("step:floor", "floor: bytes / 4.27 TB/s", floor, dashed=True))
    for pl in ("replicated", "sharded"):
        sim = _blocks_series(index, "SimulatedShards",
                             lambda p, fl, pl=pl: p.get("vocab") == STEP_VOCAB and p.get("ranks") == 2 and pl in fl
                             and fl[:1] == ("f32",), lambda p: p["tokens"] // BLOCK)
        if sim:
            left["series"].append(_line("step:sim2:%s" % pl, "dfsel, 2 simulated ranks, %s" % pl, sim, markers_only=True,
                                        marker="D" if pl == "replicated" else "v"))
    torch = []
    src = index.newest("torch_step")
    if src:
        one_block = src.data.get("shape", {}).get("tokens", BLOCK) // BLOCK  # files whose rows name no blocks
        for i, row in enumerate(src.data["against_torch"]):
            if row.get("vocab") == STEP_VOCAB and row.get("torch_us") is not None:
                where = {"file": src.rel, "row": "against_torch[%d]" % i, "field": "torch_us", "kind": src.kind}
                torch.append((row.get("blocks", one_block), row["torch_us"], where, None))
        torch.sort(key=lambda t: t[0])
    if torch:
        left["series"].append(_line("step:torch", "plain PyTorch selector (bench_step.py)", torch))
    else:
        f.d["missing"].append("the PyTorch selector (no bench/python/bench_step.py JSON for this GPU)")
    measured = sorted({t[0] for t in torch})
    absent = [b for b, _, _, _ in step if b not in measured]
    if torch and absent:
        most = measured[-1]
        if all(b > most for b in absent):
            f.d["missing"].append("the PyTorch selector beyond %d block%s (bench_step.py measures %s)" % (
                most, "" if most == 1 else "s", "one block" if measured == [1] else
                "%s blocks" % ", ".join(str(b) for b in measured)))
        else:
            f.d["missing"].append("the PyTorch selector at %s block%s (the newest bench_step.py JSON measures %s)" % (
                ", ".join(str(b) for b in absent), "" if absent == [1] else "s",
                ", ".join(str(b) for b in measured)))

    # DSpark chain: greedy, at the shape (V, R, N) of the newest DSparkStep row.
    right = f.panel(title="DSpark chain (N steps a block), greedy", notes=[], xlabel="blocks")
    shape, newest = None, None
    for n in index.names("DSparkStep"):
        fields, src = index.row(n, "time_us")
        if src is not None and (newest is None or src.order > newest):
            fam, p, fl = results.parse_name(n)
            shape, newest = {k: p.get(k) for k in ("vocab", "r", "n")}, src.order
    if shape:
        right["title"] = "DSpark chain, V %s, R %s, N %s, greedy" % (shape["vocab"], shape["r"], shape["n"])

    def dspark(ranks):
        return _blocks_series(index, "DSparkStep",
                              lambda p, fl: all(p.get(k) == shape[k] for k in shape) and p.get("ranks", 1) == ranks
                              and "greedy" in fl and "tile" not in p, lambda p: p["blocks"])
    one, two = (dspark(1), dspark(2)) if shape else ([], [])
    right["series"].append(_line("dspark:dfsel", "dfsel DSparkStep (1 GPU)", one))
    if two:
        right["series"].append(_line("dspark:sim2", "dfsel, 2 simulated ranks", two, markers_only=True))
    floor, target, target2 = [], [], []
    for b, _, _, n in one:
        v, w = index.lookup(n, "floor_us")
        if v is not None:
            floor.append((b, v, w, n))
    for pts, out in ((one, target), (two, target2)):
        for b, _, _, n in pts:
            v, w = index.lookup(n, "target_us")
            if v is not None:
                out.append((b, v, w, n))
    right["series"].append(_line("dspark:floor", "floor: bytes / 4.27 TB/s", floor, dashed=True))
    for n in index.names("DSparkW2ReadFloor"):
        fam, p, fl = results.parse_name(n)
        if shape and all(p.get(k) == shape[k] for k in shape):
            v, w = index.lookup(n)
            right["series"].append({"id": "dspark:w2floor", "label": "DSparkW2ReadFloor: W2 read N times",
                                    "style": "hline", "points": [_point("w2", v, w)]})
            break
    if target:
        right["series"].append(_line("dspark:target", "target, 1 GPU", target, markers_only=True, marker="x"))
    if target2:
        right["series"].append(_line("dspark:target2", "target, 2 simulated ranks", target2, markers_only=True,
                                     marker="x"))
    src = index.newest("torch_dspark")
    torch, cublas = [], []
    if src:
        for i, row in enumerate(src.data["rows"]):
            if not shape or row.get("vocab") == shape["vocab"]:
                for field, into in (("torch_us", torch), ("cublas_us", cublas)):
                    if row.get(field) is not None:
                        where = {"file": src.rel, "row": "rows[%d]" % i, "field": field, "kind": src.kind}
                        into.append((row["blocks"], row[field], where, None))
        torch.sort(key=lambda t: t[0])
        cublas.sort(key=lambda t: t[0])
    if cublas:
        right["series"].append(_line("dspark:cublas", "cuBLAS's product alone, N GEMMs (bench_dspark.py)", cublas))
    if torch:
        right["series"].append(_line("dspark:torch", "PyTorch loop in a CUDA graph (bench_dspark.py)", torch))
    else:
        f.d["missing"].append("the DSpark PyTorch loop (no bench/python/bench_dspark.py JSON for this GPU)")
    if not one:
        f.d["missing"].append("DSparkStep rows")
    return f.done(index)


GGML_BLOCKS = (1, 4, 16, 64)  # what dfsel_ggml_bench measures
GGML_SERIES = (  # (id, row, label): the rows <row>/blocks:N
    ("ggml:peer", "InGraphSelector", "llama.cpp's in-graph selector, per ggml_backend_graph_compute"),
    ("ggml:patched", "InGraphSelector/ggml:dfsel-topk",
     "llama.cpp's in-graph selector, ggml-cuda's TOP_K on dfsel's top-K (integrations/ggml patch)"),
    ("ggml:eager", "DfselGgml/eager", "dfsel between graph computes (dfsel_ggml_run, then the wait)"),
    ("ggml:graph", "DfselGgml/graph", "dfsel's step as a CUDA graph, one replay and the wait"),
    ("ggml:replayed", "DfselGgml/replayed", "dfsel's step back to back in a CUDA graph (as SelectorStep is timed)"),
)


def _ggml_points(index, row):
    """(blocks, value, where, name, source) of the rows <row>/blocks:N, each from the newest row
    of its name: its median_us counter, else its real_time. A row's name is <row> and its blocks,
    nothing else: InGraphSelector/ggml:dfsel-topk/blocks:N (dfsel_ggml_bench on another ggml-cuda,
    DFSEL_GGML_LABEL) is not InGraphSelector's."""
    want = results.parse_name(row)
    pts = []
    for n in index.names(want[0]):
        fam, params, flags = results.parse_name(n)
        rest = {k: v for k, v in params.items() if k != "blocks"}
        if not isinstance(params.get("blocks"), int) or (fam, rest, flags) != want:
            continue
        fields, src = index.row(n, "time_us")
        if fields is None:
            continue
        if fields.get("median_us") is not None:
            value, field = fields["median_us"], "median_us"
        else:
            value, field = fields["time_us"], fields["_time_field"]
        pts.append((params["blocks"], value, results.field_path(src, n, field), n, src))
    pts.sort(key=lambda t: t[0])
    return pts


def _ratio_label(r):
    return "%.0fx" % r if r >= 10 else "%.1fx" % r


def _blocks_text(blocks):
    return "%s block%s" % (", ".join(str(b) for b in blocks), "" if list(blocks) == [1] else "s")


def _speedup_label(r):
    return "%s faster" % _ratio_label(r) if r >= 1 else "%s slower" % _ratio_label(1 / r)


def build_ggml(index):
    f = _Figure("ggml-cuda", "llama.cpp's in-graph selector on ggml-cuda vs dfsel on the same tensors", index.gpu)
    p = f.panel(title="DFlash2 selector by blocks of %d tokens, both on the same ggml-cuda tensors (dfsel_ggml_bench)"
                % BLOCK, notes=[], ratios=[], patched_ratios=[], peer=None,
                xlabel="tokens (%d x blocks)" % BLOCK)
    read = {}
    for sid, row, label in GGML_SERIES:
        pts = _ggml_points(index, row)
        read[sid] = pts
        p["series"].append({"id": sid, "label": label, "style": "line", "row": row,
                            "points": [dict(_point(b, v, w), x=BLOCK * b, blocks=b) for b, v, w, _, _ in pts]})
        if sid == "ggml:peer" and pts:
            p["peer"] = max((t[4] for t in pts), key=lambda s: s.order).data.get("context", {}).get("peer")
    if not any(read.values()):
        what = "InGraphSelector and DfselGgml rows (dfsel_ggml_bench)"
        f.d["missing"].append("%s: no such row in any result JSON for this GPU" % what)
        p["notes"].append("not recorded: " + what)
        return f.done(index)
    for sid, row, label in GGML_SERIES:
        got = [t[0] for t in read[sid]]
        absent = [b for b in GGML_BLOCKS if b not in got]
        if not got:
            f.d["missing"].append("%s (no %s/blocks:N row in any result JSON)" % (row, row))
        elif absent:
            f.d["missing"].append("%s at %s (the newest rows measure %s)" % (row, _blocks_text(absent),
                                                                             ", ".join(str(b) for b in got)))
    eager = {t[0]: t[1] for t in read["ggml:eager"]}
    patched = {t[0]: t[1] for t in read["ggml:patched"]}
    for b, v, _, _, _ in read["ggml:peer"]:
        if eager.get(b):
            r = v / eager[b]
            p["ratios"].append({"blocks": b, "x": BLOCK * b, "value": r, "label": _ratio_label(r),
                                "of": ["ggml:peer", "ggml:eager"]})
        if patched.get(b):
            r = v / patched[b]
            p["patched_ratios"].append({"blocks": b, "x": BLOCK * b, "value": r, "label": _speedup_label(r),
                                        "of": ["ggml:peer", "ggml:patched"]})
    return f.done(index)


GGML_TOPK_BUILDS = (  # (build, label): GgmlTopK/ggml_cuda:<build>/cols:C/rows:R/k:K
    ("unpatched", "ggml-cuda's TOP_K as it is (sorts each row whole)"),
    ("patched", "with dfsel's top-K for k <= 64 (integrations/ggml patch)"),
)
GGML_TOPK_DFSEL_MAX_K = 64  # the patch's rule for F32 rows, as bench/ggml/topk_perf_table.py applies it
GGML_TOPK_MIN_COLS = 100000  # the vocabularies of drafts and sampling; the narrower cases are left out


def _ggml_topk_cases(index):
    """{(cols, rows, k): {build: row name}} of the GgmlTopK rows."""
    cases = {}
    for n in index.names("GgmlTopK"):
        fam, params, flags = results.parse_name(n)
        build = params.get("ggml_cuda")
        if flags or set(params) != {"ggml_cuda", "cols", "rows", "k"} or build not in dict(GGML_TOPK_BUILDS) or \
                not all(isinstance(params[k], int) for k in ("cols", "rows", "k")):
            continue
        cases.setdefault((params["cols"], params["rows"], params["k"]), {})[build] = n
    return cases


def build_ggml_topk(index):
    f = _Figure("ggml-topk", "ggml-cuda's TOP_K as it is and with dfsel's top-K (test-backend-ops perf -o TOP_K)",
                index.gpu)
    p = f.panel(title="TOP_K of F32 rows, time per run on each build (bench/ggml/topk_perf_table.py)", categories=[],
                cases=[], notes=[], left_out=0, min_cols=GGML_TOPK_MIN_COLS)
    series = {build: {"id": "ggml-topk:" + build, "label": label, "style": "bar", "points": []}
              for build, label in GGML_TOPK_BUILDS}
    p["series"] = list(series.values())
    cases = _ggml_topk_cases(index)
    if not cases:
        what = "GgmlTopK rows (bench/ggml/topk_perf_table.py --json, scripts/ggml-topk-gpu-check.sh's perf stage)"
        f.d["missing"].append("%s: no such row in any result JSON for this GPU" % what)
        p["notes"].append("not recorded: " + what)
        return f.done(index)
    for (cols, rows, k), names in sorted(cases.items()):
        read = {build: index.lookup(names[build]) if build in names else (None, None) for build, _ in GGML_TOPK_BUILDS}
        absent = [build for build, (v, _) in read.items() if v is None]
        if absent:
            have = [b for b in read if b not in absent]
            f.d["missing"].append("GgmlTopK/ggml_cuda:%s/cols:%d/rows:%d/k:%d (%s)" % (
                absent[0], cols, rows, k, "the %s row is recorded, not this one" % have[0] if have else "no time"))
            continue
        if cols < GGML_TOPK_MIN_COLS:
            p["left_out"] += 1
            continue
        key = "%dx%d\nk %d" % (cols, rows, k)
        p["categories"].append(key)
        p["cases"].append({"key": key, "cols": cols, "rows": rows, "k": k,
                           "path": "dfsel" if k <= GGML_TOPK_DFSEL_MAX_K else "ggml-cuda"})
        for build, (v, w) in read.items():
            series[build]["points"].append(_point(key, v, w))
    if p["left_out"]:
        p["notes"].append("%d case%s with fewer than %d columns not drawn (every case: the table of ggml-cuda's TOP_K "
                          "in bench/results/README.md, and the file below)" % (
                              p["left_out"], "" if p["left_out"] == 1 else "s", GGML_TOPK_MIN_COLS))
    return f.done(index)


BUILDERS = (build_timeline, build_topk, build_scaling, build_ggml, build_ggml_topk)


# ---- drawing ---------------------------------------------------------------------------------

FOOT_WRAP = 175
LINE_IN = 0.14  # inches a footer line takes at 7 points


def _footer_lines(desc):
    """(text, color) lines under the panels: what is missing, then the GPU and every file used with
    its date and command."""
    lines = []
    if desc["missing"]:
        lines.append(("Not recorded yet (a run that records it is drawn by the same command):", "#a04000"))
        for m in desc["missing"]:
            lines += [(t, "#a04000") for t in textwrap.wrap("- " + m, FOOT_WRAP, subsequent_indent="    ")]
    lines.append(("%s. Drawn by python3 bench/plot/make_figures.py from (file, date of the run, command):" % desc["gpu"],
                  "#222222"))
    for s in desc["sources"]:
        lines += [(t, "#444444") for t in textwrap.wrap("%s (%s): %s" % (s["file"], s["date"], s["command"]), FOOT_WRAP,
                                                        subsequent_indent="      ")]
    return lines


def _fmt(v):
    return "%.0f" % v if v >= 100 else "%.1f" % v if v >= 10 else "%.2f" % v


def _timeline_rows(desc):
    """The grid rows (cases) that have at least one recorded panel."""
    per = len(TIMELINE_TOKENS)
    panels = desc["panels"]
    rows = [panels[i:i + per] for i in range(0, len(panels), per)]
    return [r for r in rows if any(p["lanes"] for p in r)]


def _draw_timeline(fig, desc):
    rows = _timeline_rows(desc)
    if not rows:
        ax = fig.add_subplot(1, 1, 1)
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no StepTimeline row recorded for this GPU", ha="center", va="center")
        return
    axes = fig.subplots(len(rows), len(TIMELINE_TOKENS), squeeze=False)
    for ax, p in zip(axes.flat, [p for r in rows for p in r]):
        ax.set_title(p["title"], fontsize=10)
        lanes = p["lanes"]
        if not lanes:
            ax.set_axis_off()
            ax.text(0.5, 0.5, "\n".join(["not recorded:"] + textwrap.wrap(p["case"].replace("/", "/ "), 50)),
                    ha="center", va="center", fontsize=8.5, color="#777777", transform=ax.transAxes)
            continue
        ypos = {k: len(lanes) - 1 - i for i, k in enumerate(lanes)}
        ranks = p["ranks"]
        height = 0.6 / ranks  # a lane holds one bar a rank, rank 0 on top
        step = None
        for s in p["series"]:
            if s["style"] == "span":
                start, end = (pt["value"] for pt in s["points"])
                y = ypos[s["lane"]] + 0.3 - height * (s.get("rank", 0) + 0.5)
                bars = ax.barh(y, end - start, left=start, height=height * 0.9,
                               color=KERNEL_COLORS.get(s["lane"], "#7f7f7f"), alpha=1.0 if s.get("rank", 0) == 0 else 0.6)
                bars.patches[0].set_gid("series:" + s["id"])
                label = " %s - %s us" % (_fmt(start), _fmt(end))
                ax.text(end, y, (" r%d" % s["rank"] if ranks > 1 else "") + label, va="center",
                        fontsize=8 if ranks == 1 else 6.5)
            elif s["style"] == "vline":
                step = s["points"][0]["value"]
                ax.axvline(step, color="#d62728", lw=1, ls="--", gid="series:" + s["id"])
        ax.set_yticks([ypos[k] for k in lanes])
        labels = [KERNEL_LABELS.get(k, k) + ("" if any(s.get("lane") == k for s in p["series"]) else "\n(not traced)")
                  for k in lanes]
        ax.set_yticklabels(labels, fontsize=9)
        ax.set_xlim(0, step * 1.3 if step else None)
        ax.set_ylim(-0.6, len(lanes) - 0.4)
        ax.set_xlabel("us from the start of the step's first kernel", fontsize=9)
        if step:
            ax.text(step, len(lanes) - 0.45, "step %s us " % _fmt(step), color="#d62728", fontsize=8, ha="right",
                    va="top")
        if p["ranks"] == 1:
            ax.text(0.99, 0.02, "one rank: no records, no inputs check, no exchange", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=7.5, color="#777777")
        else:  # under the axis: the bars fill the panel's corners
            ax.set_xlabel("us from the start of the step's first kernel\n(one GPU, one stream; a lane's bars are "
                          "ranks 0 to %d, top down)" % (p["ranks"] - 1), fontsize=8.5)
        ax.grid(axis="x", alpha=0.3)


def _draw_topk(fig, desc):
    import numpy as np
    p = desc["panels"][0]
    ax = fig.add_subplot(1, 1, 1)
    cats = p["categories"]
    x = np.arange(len(cats))
    series = [s for s in p["series"] if s["points"]]
    width = 0.8 / max(1, len(series))
    colors = {"topk:dfsel": "#1f77b4", "topk:floor": "#bdbdbd", "topk:torch": "#ff7f0e"}
    top = 1.0
    for i, s in enumerate(series):
        idx = [cats.index(pt["key"]) for pt in s["points"]]
        vals = [pt["value"] for pt in s["points"]]
        top = max([top] + vals)
        bars = ax.bar(x[idx] + (i - (len(series) - 1) / 2) * width, vals, width, label=s["label"],
                      color=colors.get(s["id"]), hatch="//" if s["id"] == "topk:floor" else None,
                      edgecolor="#616161" if s["id"] == "topk:floor" else "white")
        for j, b in enumerate(bars.patches):
            b.set_gid("series:%s:%d" % (s["id"], j))
            ax.text(b.get_x() + b.get_width() / 2, b.get_height() * 1.05, _fmt(vals[j]), ha="center", va="bottom",
                    fontsize=7)
    dfsel = {pt["key"]: pt for pt in p["series"][0]["points"]}
    floor = {pt["key"]: pt["value"] for pt in p["series"][1]["points"]}
    torch = {pt["key"]: pt["value"] for s in p["series"] if s["id"] == "topk:torch" for pt in s["points"]}
    days = [s["date"][:10] for s in desc["sources"]]
    newest = max(days) if days else ""
    labels = []
    for key in cats:
        day = next(s["date"][:10] for s in desc["sources"] if s["file"] == dfsel[key]["from"]["file"])
        lab = key + ("\n%.1fx its floor" % (dfsel[key]["value"] / floor[key]) if key in floor else "\nno floor")
        if key in torch:
            lab += "\ntorch %.1fx dfsel" % (torch[key] / dfsel[key]["value"])
        labels.append(lab + ("" if day == newest else "\n(%s run)" % day))
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(1, top * 2.5)
    ax.set_ylabel("time per call, us (log scale; graph replay)")
    ax.set_xlabel("rows x shard vocabulary, logits type, K")
    ax.set_title(p["title"], fontsize=10)
    ax.legend(loc="upper left", fontsize=8.5)
    ax.grid(axis="y", which="both", alpha=0.25)


def _draw_scaling(fig, desc):
    axes = fig.subplots(1, 2, squeeze=False)[0]
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    styles = {"dfsel": ("#1f77b4", "o"), "floor": ("#7f7f7f", "."), "torch": ("#ff7f0e", "s"),
              "sim2": ("#9467bd", "D"), "target": ("#d62728", "x"), "target2": ("#9467bd", "x"),
              "w2floor": ("#2ca02c", None)}
    xs = [1, 2, 4, 8, 16, 32, 64]
    for ax, p in zip(axes, desc["panels"]):
        for s in p["series"]:
            kind = s["id"].split(":")[1]
            color, marker = styles.get(kind, ("#17becf", "^"))
            marker = s.get("marker", marker)
            if s["style"] == "hline":
                v = s["points"][0]["value"]
                ax.plot([xs[0] * 0.8, xs[-1] * 1.25], [v, v], color=color, ls=":", lw=1.5,
                        label="%s (%s us)" % (s["label"], _fmt(v)), gid="series:" + s["id"])
                continue
            if not s["points"]:
                continue
            x = [pt["x"] for pt in s["points"]]
            y = [pt["value"] for pt in s["points"]]
            ls = "none" if s.get("markers_only") else ("--" if s.get("dashed") else "-")
            ax.plot(x, y, color=color, marker=marker or "", ls=ls, ms=6, mew=2 if marker == "x" else 1,
                    label=s["label"], gid="series:" + s["id"])
            if kind in ("dfsel", "torch", "sim2", "floor"):
                for xi, yi in zip(x, y):
                    ax.annotate(_fmt(yi), (xi, yi), textcoords="offset points", xytext=(5, -11 if kind == "floor" else 4),
                                fontsize=7, color=color)
        ax.set_xscale("log")
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi * 1.6)  # room for the legend above the curves
        ax.set_xlim(0.8, 80)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(v) for v in xs])
        ax.set_xlabel(p["xlabel"])
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 3.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel("time per call, us (log scale; graph replay)")
        ax.set_title(p["title"], fontsize=10)
        ax.grid(which="major", alpha=0.3)
        ax.legend(fontsize=7.5, loc="best")


GGML_STYLES = {"ggml:peer": ("#ff7f0e", "s", "-"), "ggml:patched": ("#8c564b", "P", "-."),
               "ggml:eager": ("#1f77b4", "o", "-"), "ggml:graph": ("#2ca02c", "^", "--"),
               "ggml:replayed": ("#9467bd", "D", ":")}


def _draw_ggml(fig, desc):
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    p = desc["panels"][0]
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title(p["title"], fontsize=10)
    if not any(s["points"] for s in p["series"]):
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no InGraphSelector or DfselGgml row recorded for this GPU\n(dfsel_ggml_bench writes them)",
                ha="center", va="center", color="#777777")
        return
    for s in p["series"]:
        if not s["points"]:
            continue
        color, marker, ls = GGML_STYLES.get(s["id"], ("#17becf", "v", "-"))
        x = [pt["x"] for pt in s["points"]]
        y = [pt["value"] for pt in s["points"]]
        ax.plot(x, y, color=color, marker=marker, ls=ls, ms=6, label=s["label"], gid="series:" + s["id"])
        if s["id"] in ("ggml:peer", "ggml:patched", "ggml:eager"):
            for xi, yi in zip(x, y):
                ax.annotate(_fmt(yi), (xi, yi), textcoords="offset points", xytext=(6, 3), fontsize=7, color=color)
    eager = {pt["x"]: pt["value"] for s in p["series"] if s["id"] == "ggml:eager" for pt in s["points"]}
    for r in p["ratios"]:
        ax.annotate(r["label"], (r["x"], eager[r["x"]]), textcoords="offset points", xytext=(0, 13), ha="center",
                    va="bottom", fontsize=9, fontweight="bold", color="#d62728", gid="ratio:%d" % r["blocks"])
    patched = {pt["x"]: pt["value"] for s in p["series"] if s["id"] == "ggml:patched" for pt in s["points"]}
    for r in p.get("patched_ratios", []):
        ax.annotate(r["label"], (r["x"], patched[r["x"]]), textcoords="offset points", xytext=(6, -4), ha="left",
                    va="top", fontsize=7, fontstyle="italic", color=GGML_STYLES["ggml:patched"][0],
                    gid="patched-ratio:%d" % r["blocks"])
    xs = [BLOCK * b for b in GGML_BLOCKS]
    ax.set_xscale("log")
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo / 1.5, hi * 3)  # room for the legend above the curves
    ax.set_xlim(xs[0] / 1.6, xs[-1] * 1.6)
    ax.set_xticks(xs)
    ax.set_xticklabels(["%d\n(%d block%s)" % (x, x // BLOCK, "" if x == BLOCK else "s") for x in xs])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(p["xlabel"])
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
    ax.yaxis.set_minor_formatter(NullFormatter())
    fields = {pt["from"]["field"] for s in p["series"] for pt in s["points"]}
    ax.set_ylabel("median time per step, us (log scale)" if fields == {"median_us"} else
                  "time per step, us (log scale; the median where recorded, else the mean)")
    ax.grid(which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    note = "in red, above dfsel's line: llama.cpp's in-graph selector's time over dfsel's between graph computes"
    if p.get("patched_ratios"):
        note += ("\nin italics, under the patched line: how much faster the in-graph selector runs with dfsel's "
                 "top-K in ggml-cuda's TOP_K than as it is")
    if p.get("peer"):
        note = "peer: %s\n%s" % (p["peer"], note)
    ax.text(0.99, 0.02, note, transform=ax.transAxes, ha="right", va="bottom", fontsize=7.5, color="#777777")


GGML_TOPK_COLORS = {"ggml-topk:unpatched": "#ff7f0e", "ggml-topk:patched": "#8c564b"}
GGML_TOPK_SHADE = "#e3f1e3"  # behind the cases the patched build sends to dfsel's top-K
GGML_TOPK_SLOT_IN = 0.72  # inches a case takes, so that no label runs into the next


def _ggml_topk_rows(desc):
    """The drawn cases in rows of the picture, one a column count, in the panel's order."""
    rows = []
    for c in desc["panels"][0]["cases"]:
        if not rows or rows[-1][0]["cols"] != c["cols"]:
            rows.append([])
        rows[-1].append(c)
    return rows


def _draw_ggml_topk(fig, desc):
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    p = desc["panels"][0]
    rows = _ggml_topk_rows(desc)
    if not rows:
        ax = fig.add_subplot(1, 1, 1)
        ax.set_axis_off()
        ax.set_title(p["title"], fontsize=10)
        text = "no GgmlTopK row recorded for this GPU\n(bench/ggml/topk_perf_table.py --json writes them from the " \
               "logs of scripts/ggml-topk-gpu-check.sh's perf stage)"
        if p["left_out"]:
            text = "no case of %d columns or more recorded for this GPU\n%s" % (p["min_cols"], "\n".join(p["notes"]))
        ax.text(0.5, 0.5, text, ha="center", va="center", color="#777777")
        return
    series = [s for s in p["series"] if s["points"]]
    at = {key: i for i, key in enumerate(p["categories"])}  # a case's point in every series
    values = [pt["value"] for s in series for pt in s["points"]]
    # as many slots as the figure's width holds, so that a bar is as wide however few the cases
    slots = max([len(r) for r in rows] + [int((fig.get_size_inches()[0] - 2.0) / GGML_TOPK_SLOT_IN)])
    width = 0.8 / len(series)
    axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
    for n, (ax, cases) in enumerate(zip(axes, rows)):
        for j, c in enumerate(cases):
            if c["path"] == "dfsel":
                ax.axvspan(j - 0.5, j + 0.5, color=GGML_TOPK_SHADE, zorder=0, lw=0)
        for si, s in enumerate(series):
            idx = [at[c["key"]] for c in cases]
            vals = [s["points"][i]["value"] for i in idx]
            bars = ax.bar([j + (si - (len(series) - 1) / 2) * width for j in range(len(cases))], vals, width,
                          label=s["label"], color=GGML_TOPK_COLORS.get(s["id"]), edgecolor="white", zorder=2)
            for i, b, v in zip(idx, bars.patches, vals):
                b.set_gid("series:%s:%d" % (s["id"], i))
                ax.text(b.get_x() + b.get_width() / 2, v * 1.08, _fmt(v), ha="center", va="bottom", fontsize=6.5,
                        rotation=90, zorder=3)
        by = {s["id"]: s["points"] for s in series}
        labels = []
        for c in cases:
            lab = c["key"]
            old, new = (by.get("ggml-topk:" + b) for b in ("unpatched", "patched"))
            if old and new:
                lab += "\n%s" % _ratio_label(old[at[c["key"]]]["value"] / new[at[c["key"]]]["value"])
            labels.append(lab)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(labels, fontsize=7.5)
        ax.set_xlim(-0.5, slots - 0.5)
        ax.set_yscale("log")
        ax.set_ylim(min(values) / 2, max(values) * 8)  # room for the values and the legend above the bars
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel("us a run (log scale)")
        ax.set_title(("%s: " % p["title"] if n == 0 else "") + "rows of %d columns" % cases[0]["cols"], fontsize=10)
        ax.grid(axis="y", which="major", alpha=0.3, zorder=1)
    axes[-1].set_xlabel("columns x rows, k; under each, the time as it is over the time with dfsel's top-K")
    handles, names = axes[0].get_legend_handles_labels()
    handles.append(Patch(facecolor=GGML_TOPK_SHADE, label="k <= %d: the patched build runs dfsel's top-K" % (
        GGML_TOPK_DFSEL_MAX_K)))
    axes[0].legend(handles=handles, fontsize=8, loc="upper left", ncol=len(handles))
    if p["notes"]:
        axes[-1].text(0.99, 0.97, "\n".join(p["notes"]), transform=axes[-1].transAxes, ha="right", va="top",
                      fontsize=7.5, color="#777777")


def _body_height(desc):
    if desc["figure"] == "step-timeline":
        return 0.9 + 3.1 * max(1, len(_timeline_rows(desc)))
    if desc["figure"] in ("ggml-cuda", "ggml-topk") and not any(s["points"] for p in desc["panels"]
                                                               for s in p["series"]):
        return 3.0  # only the words that nothing is recorded
    if desc["figure"] == "ggml-topk":
        return 0.9 + 3.2 * len(_ggml_topk_rows(desc))
    return 6.6


DRAW = {"step-timeline": (_draw_timeline, 13), "topk-floor": (_draw_topk, 13), "step-scaling": (_draw_scaling, 14),
        "ggml-cuda": (_draw_ggml, 13), "ggml-topk": (_draw_ggml_topk, 13)}


def draw(desc):
    """A matplotlib figure of a description (no display needed)."""
    from matplotlib.figure import Figure
    fn, width = DRAW[desc["figure"]]
    if desc["figure"] == "topk-floor":  # about an inch a shape, so that no label runs into the next
        width = max(width, 2.5 + 1.0 * len(desc["panels"][0]["categories"]))
    if desc["figure"] == "ggml-topk":  # one row of the picture a column count, its cases side by side
        width = max([width] + [2.0 + GGML_TOPK_SLOT_IN * len(r) for r in _ggml_topk_rows(desc)])
    lines = _footer_lines(desc)
    body, foot = _body_height(desc), 0.25 + LINE_IN * len(lines)
    height = body + foot
    fig = Figure(figsize=(width, height))
    fn(fig, desc)
    fig.suptitle("%s (%s)" % (desc["title"], desc["gpu"]), fontsize=12)
    fig.tight_layout(rect=(0, foot / height, 1, 1 - 0.45 / height))
    for i, (text, color) in enumerate(lines):
        fig.text(0.01, (foot - 0.1 - LINE_IN * i) / height, text, fontsize=7, va="top", ha="left", family="monospace",
                 color=color)
    return fig
