#!/usr/bin/env python3
"""Draws every picture of the recorded figures, for every GPU that has results:

  python3 bench/plot/make_figures.py            # writes docs/figures/<gpu>/*.png and *.json

For each GPU (docs/figures/h200/ for "NVIDIA H200"): step-timeline.png (StepTimeline: each
kernel of a step against time, 1 and 16 blocks, one rank and two simulated ranks), topk-floor.png
(every ShardTopK shape beside its ReadFloor, and torch.topk where recorded: the TorchTopK rows of
bench/python/bench_topk.py --json), step-scaling.png (SelectorStep and DSparkStep by blocks
against their floors and the PyTorch baselines: bench/python/bench_step.py --json at each of its
rows' blocks, bench/python/bench_dspark.py --json), ggml-cuda.png (llama.cpp's in-graph DFlash2
selector on ggml-cuda against dfsel on the same ggml-cuda tensors, by blocks: the InGraphSelector
and DfselGgml rows of dfsel_ggml_bench, their median_us counters, with llama.cpp's time over
dfsel's between graph computes at each block count, and the in-graph selector on ggml-cuda
patched with dfsel's top-K where recorded: the InGraphSelector/ggml:dfsel-topk rows that
scripts/ggml-topk-gpu-check.sh's bench stage writes, with its speed-up over the unpatched one) and
ggml-topk.png (ggml-cuda's TOP_K as it is and patched, case by case, from the GgmlTopK rows of
bench/ggml/topk_perf_table.py --json: the cases of 100000 columns or more that both builds ran,
the k <= 64 ones marked as dfsel's path). With no such row for a GPU, a picture says so and lists
them as missing. Each PNG has a JSON beside it with every plotted value and the file, row and
field it came from.
Every value is read from the newest result file of that GPU that holds it (bench/plot/results.py
says how files are dated); a later run's JSON under bench/results/ or bench/python/results/
needs nothing but this command to be drawn.

Needs matplotlib (Debian: python3-matplotlib; scripts/install-deps.sh installs it).
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import figures  # noqa: E402
import results  # noqa: E402


def gpu_slug(gpu):
    """'NVIDIA H200' -> 'h200'."""
    g = re.sub(r"^(nvidia|amd|intel)\s+", "", gpu.strip(), flags=re.I)
    return re.sub(r"[^a-z0-9]+", "-", g.lower()).strip("-") or "gpu"


def describe(root=results.ROOT):
    """{gpu: [figure descriptions]} for every GPU with results under root."""
    sources = results.load(root)
    return {gpu: [build(results.Index(sources, gpu)) for build in figures.BUILDERS] for gpu in results.gpus(sources)}


def write(descs, out):
    """Writes each description's PNG and JSON under out/<gpu>/; returns the paths written."""
    import matplotlib
    matplotlib.use("Agg")
    written = []
    for gpu, figs in sorted(descs.items()):
        folder = os.path.join(out, gpu_slug(gpu))
        os.makedirs(folder, exist_ok=True)
        for d in figs:
            png = os.path.join(folder, d["figure"] + ".png")
            fig = figures.draw(d)
            fig.savefig(png, dpi=90, metadata={"Software": None})
            with open(os.path.join(folder, d["figure"] + ".json"), "w") as f:
                json.dump(d, f, indent=1, sort_keys=True)
                f.write("\n")
            written += [png, os.path.join(folder, d["figure"] + ".json")]
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=results.ROOT, help="the tree whose bench/results and bench/python/results are read")
    ap.add_argument("--out", default=None, help="where the pictures go (default: ROOT/docs/figures)")
    a = ap.parse_args(argv)
    descs = describe(a.root)
    if not descs:
        print("make_figures: no GPU result JSON under %s" % a.root, file=sys.stderr)
        return 1
    for path in write(descs, a.out or os.path.join(a.root, "docs", "figures")):
        print(os.path.relpath(path))
    for gpu, figs in sorted(descs.items()):
        for d in figs:
            for m in d["missing"]:
                print("make_figures: %s, %s: missing %s" % (gpu, d["figure"], m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
