"""bench/python/bench_topk.py and bench_step.py without a GPU: the inputs they make are the C++
benchmarks' (hashes, seeds, anchors and rotation copies against bench_data.cuh and
bench_util.cuh, written out here in plain Python integers), the names and the Google Benchmark
layout bench_topk.py writes are what bench/plot and bench/summarize.py read, bench_step.py's
against_torch rows count their agreement, and both scripts answer --help and exit 2, saying
why, where torch or a CUDA GPU is missing. With torch importable (any device), the torch side of
the inputs and the checks run on the CPU too; with a GPU, bench_topk.py runs on one tiny shape.
Neither the library nor a GPU is needed."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench", "python"))
sys.path.insert(0, os.path.join(ROOT, "bench", "plot"))
import bench_step  # noqa: E402
import bench_topk  # noqa: E402
import figures  # noqa: E402
import results  # noqa: E402

M64 = (1 << 64) - 1
TOPK = os.path.join(ROOT, "bench", "python", "bench_topk.py")
STEP = os.path.join(ROOT, "bench", "python", "bench_step.py")


def hash64(x):
    """bench_data.cuh's hash64 in Python integers."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def hashed_value(seed, i, scale):
    """hashed_value(seed, i, scale): every step rounded to float as the C++ float arithmetic is."""
    h = hash64(seed ^ ((i * 0x2545F4914F6CDD1D) & M64)) >> 40
    return f32(f32(f32(float(h)) * f32(2.0 / 16777216.0)) - 1.0) * f32(scale)


def bits(v, bf16=False):
    u = struct.unpack("<I", struct.pack("<f", f32(v)))[0]
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF if bf16 else u


@pytest.mark.parametrize("seed,scale", [(1234567, 12.0), (1234567 * 128, 12.0), (100, 8.0), (100 + 7 * 7919, 8.0),
                                        (14, 1.0), (11, 0.1)])
def test_the_hashed_inputs_are_bench_data_cuh_s(seed, scale):
    n = 300
    got = bench_step.hashed_numpy(n, scale, seed)
    assert got.dtype == np.float32
    want = [f32(hashed_value(seed, i, scale)) for i in range(n)]
    assert [struct.pack("<f", v) for v in got.tolist()] == [struct.pack("<f", v) for v in want]
    assert bench_step.bits_numpy(got, "f32").tolist() == [bits(v) for v in want]
    assert bench_step.bits_numpy(got, "bf16").tolist() == [bits(v, True) for v in want]
    assert np.abs(got).max() <= scale


def test_the_anchors_and_seeds_are_setup_rank_s():
    assert bench_step.anchor_ids(64, 248320) == [hash64(b) % 248320 for b in range(64)]
    assert bench_step.anchor_id(202048) == hash64(0) % 202048
    assert [bench_step.logits_seed(c) for c in range(3)] == [100, 8019, 15938]
    assert [bench_topk.input_seed(c) for c in range(3)] == [1234567, 2469134, 3703701]


def test_rotation_copies_and_calls_are_bench_util_cuh_s():
    l2 = 60 << 20
    for nbytes in (1, 100, 496640, 993280, 3973120, 7946240, 15892480, 63569920, 2 * l2 - 1, 2 * l2, 10 ** 10):
        want = 1 if nbytes >= 2 * l2 else min((2 * l2 + nbytes - 1) // nbytes, 128)
        assert bench_step.rotation_copies(nbytes) == want, nbytes
    assert bench_step.rotation_copies(0) == 1
    # The step at 1, 4, 16, 64 blocks: 8 copies (the C++ benchmark's, bench_step.COPIES), 2, 1, 1.
    assert [bench_step.rotation_copies(b * 16 * 248320 * 4) for b in bench_step.BLOCKS] == [8, 2, 1, 1]
    assert bench_step.COPIES == 8
    for copies in (1, 2, 3, 7, 8, 16, 17, 127, 128):
        calls = bench_step.graph_calls(copies)
        assert calls >= 16 and calls % copies == 0 and calls - copies < 16


def test_a_long_call_is_timed_less():
    plan = bench_step.timing_plan
    assert plan(0.4, 10, 50, 2.0) == (10, 50)      # dfsel at one block: as before
    assert plan(3.9, 10, 50, 2.0) == (10, 50)      # the PyTorch selector at one block: as before
    assert plan(6.4, 10, 50, 2.0) == (10, 31)      # fewer timings
    assert plan(50.0, 10, 50, 2.0) == (1, 40)      # one replay a timing
    assert plan(500.0, 10, 50, 2.0) == (1, 10)     # never under min_timings
    assert plan(500.0, 10, 50, 0.5, min_timings=5) == (1, 5)


def test_against_torch_rows_count_agreement():
    mine = [[5, 6, 7], [8, 9, 10], [11, 12, -1]]
    theirs = [[5, 6, 7], [8, 0, 0], [3, 12, 13]]
    row = bench_step.against_torch_row(248320, 3, 1, [10.0, 12.0, 11.0], [100.0, 99.0, 130.0], (10, 50), (1, 40),
                                       mine, theirs)
    assert row["blocks"] == 3 and row["tokens"] == 48 and row["logits_copies"] == 1
    assert row["dfsel_us"] == 11.0 and row["torch_us"] == 100.0 and row["x_vs_torch"] == pytest.approx(100 / 11)
    assert row["first_tokens_agree"] == 2 and row["paths_agree"] == 1
    assert (row["first_token_dfsel"], row["first_token_torch"]) == (5, 5)
    assert (row["dfsel_replays_per_timing"], row["dfsel_timings"], row["torch_replays_per_timing"],
            row["torch_timings"]) == (10, 50, 1, 40)
    json.dumps(row)  # plain numbers and lists
    assert bench_step.parse_blocks("1,4, 16,64") == [1, 4, 16, 64]
    for bad in ("", "0", "1,-4", "x"):
        with pytest.raises(ValueError):
            bench_step.parse_blocks(bad)


def test_the_topk_shapes_are_the_shard_topk_rows_of_the_figure():
    assert len(bench_topk.SHAPES) == len(set(bench_topk.SHAPES)) == 19
    index = results.Index(results.load(), "NVIDIA H200")
    drawn = {(t, v, d, k) for t, v, _, _, k, d, _ in figures._topk_shapes(index)}
    assert drawn <= set(bench_topk.SHAPES), "ShardTopK shapes drawn that bench_topk.py does not time: %s" % (
        drawn - set(bench_topk.SHAPES))
    for shape in bench_topk.SHAPES:
        name = bench_topk.bench_name(shape)
        assert name == bench_topk.bench_name(shape, "ShardTopK").replace("ShardTopK/", "TorchTopK/", 1)
        fam, params, flags = results.parse_name(name)
        assert fam == "TorchTopK" and params == {"tokens": shape[0], "vocab": shape[1], "k": shape[3]}
        assert flags == (shape[2],)
    assert bench_topk.bench_name((16, 124160, "f32", 16)) == "TorchTopK/tokens:16/vocab:124160/f32/k:16/manual_time"


def test_shapes_are_parsed():
    assert bench_topk.parse_shapes("16x124160, 16x124160:bf16,1x248320:f32:64") == [
        (16, 124160, "f32", 16), (16, 124160, "bf16", 16), (1, 248320, "f32", 64)]
    for bad in ("", "16", "16x", "16x124160:f8", "16x124160:f32:0", "4x10:f32:11", "16x124160:f32:16:1", "0x10"):
        with pytest.raises(ValueError):
            bench_topk.parse_shapes(bad)


def topk_file(tmp_path, rounds_us, shapes=((16, 124160, "f32", 16),), gpu="NVIDIA H200",
              date="2026-12-09T10:00:00+00:00"):
    """A result file as bench_topk.py writes it, from its own functions."""
    rows = []
    for i, shape in enumerate(shapes):
        copies = bench_step.rotation_copies(bench_topk.shape_bytes(shape))
        rows += bench_topk.benchmark_rows(shape, [r * (i + 1) for r in rounds_us], 50, 10, copies, family_index=i)
    ctx = {"date": date, "executable": bench_topk.EXECUTABLE, "gpu": gpu, "torch": "2.11.0",
           "command": "python3 bench/python/bench_topk.py --json h200-2026-12-09-bench_topk.json"}
    folder = tmp_path / "bench" / "python" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "h200-2026-12-09-bench_topk.json"
    path.write_text(json.dumps(bench_topk.result_json(ctx, rows), indent=2))
    return path


def test_the_topk_file_reads_as_dfsel_bench_output(tmp_path):
    path = topk_file(tmp_path, [70.0, 68.0, 69.0, 71.0, 67.5])
    data = json.loads(path.read_text())
    rows = data["benchmarks"]
    name = "TorchTopK/tokens:16/vocab:124160/f32/k:16/manual_time"
    it = [b for b in rows if b["run_type"] == "iteration"]
    assert [b["repetition_index"] for b in it] == [0, 1, 2, 3, 4]
    assert all(b["name"] == b["run_name"] == name and b["time_unit"] == "us" and b["iterations"] == 50 for b in it)
    assert {b["aggregate_name"]: b["name"] for b in rows if b["run_type"] == "aggregate"} == {
        "mean": name + "_mean", "median": name + "_median", "stddev": name + "_stddev"}
    first = it[0]
    assert first["GB/s"] == pytest.approx(16 * 124160 * 4 / 70e-6 / 1e9)
    assert first["floor_us"] == pytest.approx(16 * 124160 * 4 / 4.27e12 * 1e6)
    assert first["x_floor"] == pytest.approx(70.0 / first["floor_us"])
    assert (first["copies"], first["calls_per_graph"], first["replays_per_timing"]) == (16, 16, 10)

    (src,) = results.load(str(tmp_path))
    assert (src.kind, src.gpu, src.day()) == ("gbench", "NVIDIA H200", "2026-12-09")
    assert src.command == "python3 bench/python/bench_topk.py --json h200-2026-12-09-bench_topk.json"
    value, where = results.Index([src], "NVIDIA H200").lookup(name)
    assert value == 69.0 and where["field"] == "real_time"  # the median aggregate

    one = bench_topk.benchmark_rows((1, 124160, "f32", 16), [3.5], 50, 10, 128)
    assert len(one) == 1 and one[0]["repetitions"] == 1 and one[0]["real_time"] == 3.5

    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "summarize.py"), str(path)],
                         capture_output=True, text=True, check=True).stdout
    table = [line for line in out.splitlines() if line.startswith("| TorchTopK/")]
    assert len(table) == 6 and table[-1].startswith("| %s_median | 69.00 |" % name)


def test_command_line_is_taken_back_by_a_shell():
    cmd = bench_step.command_line(["bench/python/bench_topk.py", "--shapes", "16x124160:bf16", "--json", "a b.json"])
    assert cmd.endswith(" bench/python/bench_topk.py --shapes 16x124160:bf16 --json 'a b.json'")
    assert results._utc(bench_step.now_iso()).tzinfo is not None


@pytest.mark.parametrize("script", [TOPK, STEP])
def test_help_answers_anywhere(script):
    r = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--json" in r.stdout, r.stderr


@pytest.mark.parametrize("script", [TOPK, STEP])
def test_without_a_gpu_the_scripts_exit_2_saying_why(script):
    if bench_step.gpu_missing(need_dfsel=False) is None:
        pytest.skip("torch sees a CUDA GPU here: the script would run")
    r = subprocess.run([sys.executable, script, "--rounds", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "not run: " in r.stderr and "Traceback" not in r.stderr, (r.stdout, r.stderr)


def test_bad_arguments_are_refused():
    r = subprocess.run([sys.executable, TOPK, "--shapes", "16x"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "TOKENSxVOCAB" in r.stderr
    r = subprocess.run([sys.executable, STEP, "--blocks", "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "positive" in r.stderr


# ---- with torch, on its CPU ------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_the_torch_inputs_are_the_numpy_ones(torch, dtype):
    xs = bench_topk.make_inputs((3, 5000, dtype, 16), "cpu")  # check_hashed on the first and last copy
    assert len(xs) == 128 and xs[0].shape == (3, 5000)
    assert xs[0].dtype == {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    for c in (0, 1, 127):
        bench_step.check_hashed(xs[c], 12.0, bench_topk.input_seed(c))
    with pytest.raises(SystemExit, match="differ"):
        bench_step.check_hashed(xs[1], 12.0, bench_topk.input_seed(0))


def test_the_topk_check_refuses_a_wrong_answer(torch, monkeypatch):
    x = bench_topk.make_inputs((4, 3000, "f32", 16), "cpu")[0]
    for k in (1, 16, 64):
        bench_topk.check_topk(x, k)
    real = torch.topk

    def unsorted(x, k, dim=1):
        v, i = real(x, k, dim=dim)
        return v.flip(1), i.flip(1)

    def off_by_one(x, k, dim=1):
        v, i = real(x, k + 1, dim=dim)
        return v[:, 1:], i[:, 1:]

    for wrong, what in ((unsorted, "not sorted"), (off_by_one, "host sort")):
        monkeypatch.setattr(torch, "topk", wrong)
        with pytest.raises(SystemExit, match=what):
            bench_topk.check_topk(x, 16)
        monkeypatch.setattr(torch, "topk", real)


def test_the_pytorch_selector_takes_blocks_apart(torch):
    """TorchSelector on n blocks draws, for each block, the path it draws for that block alone."""
    vocab, rank, embd, blocks = 700, 8, 32, 3
    g = torch.Generator().manual_seed(5)
    e_prev = torch.randn(vocab, rank, generator=g).to(torch.bfloat16)
    e_next = torch.randn(vocab, rank, generator=g).to(torch.bfloat16)
    w_h = torch.randn(rank, embd, generator=g).to(torch.bfloat16)
    logits = torch.randn(blocks * 16, vocab, generator=g) * 4
    hidden = torch.randn(blocks * 16, embd, generator=g)
    anchors = torch.tensor(bench_step.anchor_ids(blocks, vocab), dtype=torch.int32)
    peer = bench_step.TorchSelector(e_prev, e_next, w_h, 16)
    path = peer(logits, hidden, anchors)
    assert path.shape == (blocks, 15)
    for b in range(blocks):
        rows = slice(b * 16, (b + 1) * 16)
        alone = peer(logits[rows], hidden[rows], anchors[b:b + 1])
        assert torch.equal(alone[0], path[b]), b
        top = torch.topk(logits[b * 16 + 1], 16).indices
        assert int(path[b, 0]) in top.tolist()


def test_on_a_gpu_bench_topk_writes_what_the_plotter_reads(tmp_path):
    if bench_step.gpu_missing(need_dfsel=False) is not None:
        pytest.skip("no CUDA GPU for torch: %s" % bench_step.gpu_missing(need_dfsel=False))
    out = tmp_path / "bench" / "python" / "results"
    out.mkdir(parents=True)
    path = out / "gpu-2026-12-09-bench_topk.json"
    r = subprocess.run([sys.executable, TOPK, "--shapes", "2x3000:bf16:8", "--rounds", "2", "--json", str(path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout, r.stderr)
    (src,) = results.load(str(tmp_path))
    name = "TorchTopK/tokens:2/vocab:3000/bf16/k:8/manual_time"
    value, _ = results.Index([src], src.gpu).lookup(name)
    assert src.kind == "gbench" and value > 0 and "--shapes 2x3000:bf16:8" in src.command
