"""Where torch.ops.dfsel.select_out's host time goes (bench/python/results/README.md, "the torch
operators"): the operator, the same Python function called directly (no dispatcher), plan.run
beside them, two operators of the same schema that do nothing (the dispatcher's own cost, with
and without an Autograd kernel), and the operator's pieces alone. One step of bench_step.py's
shape; host time per call, median of interleaved rounds. Run from the repository root on a
CUDA machine with torch:
  DFSEL_LIBRARY=BUILD/host/libdfsel.so PYTHONPATH=python python3 bench/python/experiments/torch_op_costs.py
"""
import statistics
import sys

import torch

sys.path.insert(0, "bench/python")
import bench_step as b  # noqa: E402
from dfsel import _torch_op as op  # noqa: E402

plan, inputs, _ = b.setup(b.V, "cuda:0")
f = plan.outputs(1)
lg, h, a = inputs[0]
ws, handle = plan.workspace, plan.handle
given = (f.cand_ids, f.unary, f.scores, f.q, f.path, f.n_emitted)

SCHEMA = ("(Tensor logits, Tensor hidden, Tensor anchors, Tensor{a} workspace, int plan, float temperature, "
          "float p_min, int seed, Tensor{b} cand_ids, Tensor{c} unary, Tensor{d} scores, Tensor{e} q, "
          "Tensor{f} path, Tensor{g} n_emitted) -> ()")
lib = torch.library.Library("dfsel_costs", "DEF")
lib.define("nothing_out" + SCHEMA.format(**{k: "(%s!)" % k for k in "abcdefg"}))
lib.define("nothing" + SCHEMA.format(**{k: "" for k in "abcdefg"}))
for name in ("nothing_out", "nothing"):
    lib.impl(name, lambda *args: None, "CUDA")
lib.impl("nothing_out", lambda *args: None, "Autograd")  # past the autograd fallback

state = op._State(plan)
shapes = state.shapes_for(plan, 1)
calls = {
    "plan.run(out=), six outputs": lambda: plan.run(lg, h, a, out=f),
    "torch.ops.dfsel.select_out": lambda: torch.ops.dfsel.select_out(lg, h, a, ws, handle, 0.0, 0.0, 0, *given),
    "select_out's function, called directly": lambda: op._select_out(lg, h, a, ws, handle, 0.0, 0.0, 0, *given),
    "an operator doing nothing, mutable args": lambda: torch.ops.dfsel_costs.nothing_out(
        lg, h, a, ws, handle, 0.0, 0.0, 0, *given),
    "an operator doing nothing": lambda: torch.ops.dfsel_costs.nothing(lg, h, a, ws, handle, 0.0, 0.0, 0, *given),
    "piece: plan and state lookup": lambda: op._state(handle, ws),
    "piece: torch.cuda.current_stream": lambda: op._stream(plan),
    "piece: six output checks": lambda: [t.dtype != d or t.shape != s or t.device != state.device or
                                         not t.is_contiguous() for t, s, d in zip(given, shapes, op._DTYPES)],
    "piece: six pointers into the struct": lambda: state.point_at(given),
    "piece: inputs checked and bound": lambda: plan._prepare_inputs(lg, h, a, 0.0, 0.0, 0),
}


for fn in calls.values():
    for _ in range(50):
        fn()
samples = {k: [] for k in calls}
for _ in range(5):
    for k, fn in calls.items():
        samples[k].append(b.host_us(fn, rounds=40))
plan.check()
print("torch %s, %s; host us per call" % (torch.__version__, torch.cuda.get_device_name(0)))
for k, v in samples.items():
    print("%-44s %8.2f" % (k, statistics.median(v)))
