"""The CUDA backend from torch (and CuPy) on realistic shapes: against a plain torch selector,
captured in torch.cuda.graph and replayed with new inputs, compiled with torch.compile through
torch.ops.dfsel.select, two plans on two streams. Skips without torch or a GPU."""
import pytest

import dfsel
from gpu_support import REALISTIC, TorchProblem, captured, check_against_torch, need, torch_or_skip


@pytest.fixture(scope="module")
def torch():
    return torch_or_skip()


def same_bits(a, b):
    for k, v in a.as_dict().items():
        w = b.as_dict()[k]
        assert v.shape == w.shape and v.cpu().numpy().tobytes() == w.cpu().numpy().tobytes(), k


CASES = [  # logits, hidden, weights, n_blocks, ties, temperature, p_min
    ("float32", "float32", "bfloat16", 1, False, 0.0, 0.0),
    ("bfloat16", "bfloat16", "bfloat16", 4, True, 0.0, 0.1),
    ("float16", "float32", "float16", 2, False, 0.8, 0.0),
    ("float32", "bfloat16", "bfloat16", 3, False, 1.5, 0.05),
]


@pytest.mark.parametrize("ldt,hdt,wdt,n_blocks,ties,temperature,p_min", CASES)
def test_realistic_shapes_against_torch(torch, ldt, hdt, wdt, n_blocks, ties, temperature, p_min):
    p = TorchProblem(torch, 7 + n_blocks, n_blocks, ldt=getattr(torch, ldt), hdt=getattr(torch, hdt),
                     wdt=getattr(torch, wdt), ties=ties, **REALISTIC)
    plan = p.plan()
    assert plan.backend == "cuda" and plan.device == 0
    out = plan.run(p.logits, p.hidden, p.anchors, temperature=temperature, p_min=p_min, seed=42)
    plan.check()
    assert isinstance(out.path, torch.Tensor) and out.path.device == p.logits.device
    assert out.cand_ids.dtype == torch.int32 and out.scores.shape == (n_blocks * 15, 16, 16)
    near = check_against_torch(p, out, temperature, p_min, 42)
    assert near <= 2


def replay_new_inputs(torch, p, plan, static, graph, seed):
    """Fresh inputs (seed) copied into the captured ones, the graph replayed and checked."""
    p.new_inputs(seed)
    for s, new in zip(static, (p.logits, p.hidden, p.anchors)):
        s.copy_(new)
    graph.replay()
    torch.cuda.synchronize()
    plan.check()


def test_graph_capture_replays_new_inputs(torch):
    p = TorchProblem(torch, 3, 2, ldt=torch.float32, hdt=torch.bfloat16, wdt=torch.bfloat16, **REALISTIC)
    plan = p.plan()
    static = [p.logits.clone(), p.hidden.clone(), p.anchors.clone()]
    out = plan.outputs(2)
    graph, _ = captured(torch, lambda: plan.run(*static, out=out))
    for seed in (11, 12, 13):
        replay_new_inputs(torch, p, plan, static, graph, seed)
        eager = plan.run(p.logits, p.hidden, p.anchors)
        same_bits(eager, out)
        check_against_torch(p, out)


def test_torch_compile_calls_the_custom_op(torch):
    need(dfsel.torch_op_error is None, "torch.ops.dfsel.select is not registered: %s" % dfsel.torch_op_error)
    p = TorchProblem(torch, 5, 1, ldt=torch.bfloat16, hdt=torch.bfloat16, wdt=torch.bfloat16, **REALISTIC)
    plan = p.plan()

    def step(logits, hidden, anchors):
        cand, unary, scores, q, path, n = torch.ops.dfsel.select(logits * 1.0, hidden, anchors, plan.workspace,
                                                                 plan.handle, 0.7, 0.0, 123)
        return path, n, q.sum(dim=1), scores

    compiled = torch.compile(step, fullgraph=True)  # a graph break is an error here
    got = compiled(p.logits, p.hidden, p.anchors)
    want = plan.run(p.logits, p.hidden, p.anchors, temperature=0.7, seed=123)
    assert torch.equal(got[0], want.path) and torch.equal(got[1], want.n_emitted)
    assert torch.equal(got[3], want.scores)
    torch.testing.assert_close(got[2], want.q.sum(dim=1))
    greedy = torch.ops.dfsel.select(p.logits, p.hidden, p.anchors, plan.workspace, plan.handle, 0.0, 0.0, 0)
    assert torch.equal(greedy[3], torch.zeros_like(greedy[3]))  # q: zeros for a greedy walk
    p.new_inputs(99)
    got = compiled(p.logits, p.hidden, p.anchors)
    assert torch.equal(got[0], plan.run(p.logits, p.hidden, p.anchors, temperature=0.7, seed=123).path)


def need_op():
    need(dfsel.torch_op_error is None, "torch.ops.dfsel is not registered: %s" % dfsel.torch_op_error)


def op_results(torch, plan, p, temperature, seed, n_blocks):
    """select and select_out on the same inputs, each as a dfsel.Outputs-like dict."""
    got = torch.ops.dfsel.select(p.logits, p.hidden, p.anchors, plan.workspace, plan.handle, temperature, 0.0, seed)
    out = plan.outputs(n_blocks)
    for a in out.as_dict().values():
        a.fill_(-7)  # poisoned: select_out must write them
    torch.ops.dfsel.select_out(p.logits, p.hidden, p.anchors, plan.workspace, plan.handle, temperature, 0.0, seed,
                               out.cand_ids, out.unary, out.scores, out.q, out.path, out.n_emitted)
    return dict(zip(("cand_ids", "unary", "scores", "q", "path", "n_emitted"), got)), out.as_dict()


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_operators_match_plan_run(torch, temperature):
    need_op()
    p = TorchProblem(torch, 51, 2, ldt=torch.bfloat16, hdt=torch.float32, wdt=torch.bfloat16, **REALISTIC)
    plan = p.plan()
    assert plan.workspace is not None and plan.workspace.dtype == torch.uint8
    assert plan.workspace.device == p.logits.device
    want = plan.run(p.logits, p.hidden, p.anchors, temperature=temperature, seed=77).as_dict()
    got, got_out = op_results(torch, plan, p, temperature, 77, 2)
    torch.cuda.synchronize()
    plan.check()
    for k, v in want.items():
        if k == "q" and temperature <= 0:
            assert torch.equal(got[k], torch.zeros_like(got[k]))  # select: zeros for a greedy walk
            continue
        assert torch.equal(got[k], v), k
        assert torch.equal(got_out[k], v), k


def test_operator_schemas_name_what_they_write(torch):
    need_op()
    written = lambda op: [a.name for a in op.default._schema.arguments  # noqa: E731
                          if a.alias_info is not None and a.alias_info.is_write]
    assert written(torch.ops.dfsel.select) == ["workspace"]
    assert written(torch.ops.dfsel.select_out) == ["workspace", "cand_ids", "unary", "scores", "q", "path",
                                                   "n_emitted"]


def test_operators_refuse_what_is_not_the_plans(torch):
    need_op()
    p = TorchProblem(torch, 52, 1, ldt=torch.float32, hdt=torch.float32, wdt=torch.bfloat16,
                     V=4096, E=256, R=64, K=16, block_size=16)
    plan, other = p.plan(), p.plan()
    with pytest.raises(dfsel.Error, match="workspace is not plan.workspace"):
        torch.ops.dfsel.select(p.logits, p.hidden, p.anchors, other.workspace, plan.handle, 0.0, 0.0, 0)
    with pytest.raises(dfsel.Error, match="workspace is not plan.workspace"):
        torch.ops.dfsel.select(p.logits, p.hidden, p.anchors, plan.workspace[:-1], plan.handle, 0.0, 0.0, 0)
    with pytest.raises(dfsel.Error, match="is not the handle of a live dfsel.Plan"):
        torch.ops.dfsel.select(p.logits, p.hidden, p.anchors, plan.workspace, -5, 0.0, 0.0, 0)
    out = plan.outputs(1)
    args = [out.cand_ids, out.unary, out.scores, out.q, out.path, out.n_emitted]
    bad = list(args)
    bad[2] = out.scores.transpose(1, 2)
    with pytest.raises(dfsel.Error, match="scores is .* not contiguous"):
        torch.ops.dfsel.select_out(p.logits, p.hidden, p.anchors, plan.workspace, plan.handle, 0.0, 0.0, 0, *bad)
    bad = list(args)
    bad[0] = out.cand_ids.float()
    with pytest.raises(dfsel.Error, match="cand_ids is torch.float32"):
        torch.ops.dfsel.select_out(p.logits, p.hidden, p.anchors, plan.workspace, plan.handle, 0.0, 0.0, 0, *bad)
    with pytest.raises(dfsel.Error, match="logits is on cpu"):
        torch.ops.dfsel.select(p.logits.cpu(), p.hidden, p.anchors, plan.workspace, plan.handle, 0.0, 0.0, 0)


def test_operator_given_a_copy_of_the_workspace(torch):
    # What a backend that does not write mutated inputs in place hands the operator.
    need_op()
    p = TorchProblem(torch, 53, 1, ldt=torch.float32, hdt=torch.float32, wdt=torch.bfloat16, **REALISTIC)
    plan = p.plan()
    want = plan.run(p.logits, p.hidden, p.anchors).as_dict()
    copy = plan.workspace.clone()
    got = torch.ops.dfsel.select(p.logits, p.hidden, p.anchors, copy, plan.handle, 0.0, 0.0, 0)
    torch.cuda.synchronize()
    plan.check()
    assert torch.equal(copy, plan.workspace)
    assert torch.equal(got[4], want["path"]) and torch.equal(got[5], want["n_emitted"])


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_torch_compile_select_out_and_two_steps(torch, backend):
    need_op()
    p = TorchProblem(torch, 54, 1, ldt=torch.float32, hdt=torch.float32, wdt=torch.bfloat16, **REALISTIC)
    plan = p.plan()
    out = plan.outputs(1)

    def two_steps(logits, hidden, anchors):
        # two steps of one plan: the workspace orders them; the first's results are unused
        torch.ops.dfsel.select(logits, hidden, anchors, plan.workspace, plan.handle, 0.0, 0.0, 0)
        torch.ops.dfsel.select_out(logits * 2.0, hidden, anchors, plan.workspace, plan.handle, 0.5, 0.0, 9,
                                   out.cand_ids, out.unary, out.scores, out.q, out.path, out.n_emitted)
        return out.path + 0

    compiled = torch.compile(two_steps, fullgraph=True, backend=backend)
    got = compiled(p.logits, p.hidden, p.anchors)
    want = plan.run(p.logits * 2.0, p.hidden, p.anchors, temperature=0.5, seed=9)
    torch.cuda.synchronize()
    plan.check()
    assert torch.equal(got, want.path) and torch.equal(out.path, want.path)
    assert torch.equal(out.scores, want.scores) and torch.equal(out.q, want.q)


def test_operator_captured_in_a_cuda_graph(torch):
    need_op()
    p = TorchProblem(torch, 55, 2, ldt=torch.float32, hdt=torch.bfloat16, wdt=torch.bfloat16, **REALISTIC)
    plan = p.plan()
    static = [p.logits.clone(), p.hidden.clone(), p.anchors.clone()]
    graph, res = captured(torch, lambda: torch.ops.dfsel.select(*static, plan.workspace, plan.handle, 0.0, 0.0, 0))
    for seed in (61, 62):
        replay_new_inputs(torch, p, plan, static, graph, seed)
        want = plan.run(p.logits, p.hidden, p.anchors).as_dict()
        for k, got in zip(("cand_ids", "unary", "scores"), res[:3]):
            assert torch.equal(got, want[k]), k
        assert torch.equal(res[3], torch.zeros_like(res[3]))
        assert torch.equal(res[4], want["path"]) and torch.equal(res[5], want["n_emitted"])


def test_two_plans_on_two_streams(torch):
    a = TorchProblem(torch, 21, 2, ldt=torch.float32, hdt=torch.float32, wdt=torch.bfloat16, **REALISTIC)
    b = TorchProblem(torch, 22, 3, ldt=torch.bfloat16, hdt=torch.bfloat16, wdt=torch.bfloat16, **REALISTIC)
    pa, pb = a.plan(), b.plan()
    want_a, want_b = pa.run(a.logits, a.hidden, a.anchors), pb.run(b.logits, b.hidden, b.anchors)
    sa, sb = torch.cuda.Stream(), torch.cuda.Stream()
    sa.wait_stream(torch.cuda.current_stream())
    sb.wait_stream(torch.cuda.current_stream())
    outs_a, outs_b = [pa.outputs(2) for _ in range(4)], [pb.outputs(3) for _ in range(4)]
    for oa, ob in zip(outs_a, outs_b):
        pa.run(a.logits, a.hidden, a.anchors, stream=sa, out=oa)   # explicit stream objects
        pb.run(b.logits, b.hidden, b.anchors, stream=sb.cuda_stream, out=ob)  # and raw handles
    torch.cuda.synchronize()
    pa.check(sa)
    pb.check(sb)
    for oa, ob in zip(outs_a, outs_b):
        same_bits(want_a, oa)
        same_bits(want_b, ob)


def test_default_stream_is_torchs_current(torch):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        assert dfsel._streams.current("torch", 0) == s.cuda_stream


def test_cupy_arrays_and_dlpack(torch):
    try:
        import cupy
    except ImportError as e:
        need(False, "CuPy is not importable: %s" % e)
    p = TorchProblem(torch, 31, 2, ldt=torch.float16, hdt=torch.float32, wdt=torch.bfloat16, **REALISTIC)
    want = p.plan().run(p.logits, p.hidden, p.anchors)
    as_cupy = lambda t: cupy.from_dlpack(t.view(torch.int16) if t.dtype == torch.bfloat16 else t)  # noqa: E731
    bf16 = lambda t: dfsel.typed(as_cupy(t).view(cupy.uint16), "bf16")  # noqa: E731
    cplan = dfsel.Plan(n_vocab=p.V, n_embd=p.E, codebook_rank=p.R, top_k=p.K, block_size=p.block_size,
                       max_blocks=2, e_prev=bf16(p.e_prev), e_next=bf16(p.e_next), w_h=bf16(p.w_h))
    torch.cuda.synchronize()
    got = cplan.run(as_cupy(p.logits), as_cupy(p.hidden), as_cupy(p.anchors))
    cupy.cuda.get_current_stream().synchronize()
    assert isinstance(got.path, cupy.ndarray)
    for k, v in want.as_dict().items():
        assert v.cpu().numpy().tobytes() == got.as_dict()[k].get().tobytes(), k

    class OnlyDLPack:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()
    via = p.plan().run(OnlyDLPack(p.logits), OnlyDLPack(p.hidden), OnlyDLPack(p.anchors))
    torch.cuda.synchronize()
    for k, v in want.as_dict().items():
        assert v.cpu().numpy().tobytes() == via.as_dict()[k].cpu().numpy().tobytes(), k


def test_cuda_errors_name_the_argument(torch):
    p = TorchProblem(torch, 41, 1, ldt=torch.float32, hdt=torch.float32, wdt=torch.bfloat16,
                     V=4096, E=256, R=64, K=16, block_size=16)
    plan = p.plan()
    with pytest.raises(dfsel.Error, match="logits is on cpu but the plan runs on cuda:0"):
        plan.run(p.logits.cpu(), p.hidden, p.anchors)
    with pytest.raises(dfsel.Error, match="anchors has element type i64"):
        plan.run(p.logits, p.hidden, p.anchors.long())
    with pytest.raises(dfsel.Error, match="logits is not contiguous along its last axis"):
        plan.run(p.logits.t().contiguous().t(), p.hidden, p.anchors)
    with pytest.raises(dfsel.Error, match="stream = 'x'"):
        plan.run(p.logits, p.hidden, p.anchors, stream="x")
    with pytest.raises(dfsel.Error, match="backend = cpu but e_prev is on cuda:0"):
        p.plan(backend="cpu")
    bad = torch.full_like(p.anchors, 4096)
    plan.run(p.logits, p.hidden, bad)  # found on the device: reported by check()
    with pytest.raises(dfsel.Error) as e:
        plan.check()
    assert e.value.status == dfsel.Status.INVALID_ARGUMENT and "anchor" in e.value.message
    if torch.cuda.device_count() > 1:
        with pytest.raises(dfsel.Error, match="hidden is on cuda:1 but the plan runs on cuda:0"):
            plan.run(p.logits, p.hidden.to("cuda:1"), p.anchors)
