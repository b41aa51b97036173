"""The recorded figures as the plotter reads them: every JSON file under bench/results/ and
bench/python/results/, each row taken from the newest file of its GPU that holds it.

Kinds of file, told apart by their content, not their names:
  gbench       Google Benchmark output of dfsel_bench or dfsel_ggml_bench, or of
               bench/python/bench_topk.py --json (TorchTopK rows in the same layout) or
               bench/ggml/topk_perf_table.py --json (GgmlTopK rows): "benchmarks"; the GPU in
               context.gpu
  ab           scripts/ab-bench.sh output ("rows" with a_us / b_us): a run of the label_b build
  torch_step   bench/python/bench_step.py --json ("against_torch"; the GPU in "device")
  torch_dspark bench/python/bench_dspark.py --json ("rows" with torch_us and n_draft; "gpu")
Files named *-attempt* record designs that were measured and not kept: they are skipped, and so
are dfsel_bench files run with DFSEL_BENCH_REPLAYS above 1 (context.replays_per_timing): every
recorded figure is timed one replay a timing, and a steady-state file would mix two methods.

Newest: by the date in the file (context.date; bench_step.py's top-level date), else the date in
its name (YYYY-MM-DD), then by the time the file was committed (a file not yet committed is the
newest), then by name.
"""
import datetime as dt
import json
import math
import os
import re
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULT_DIRS = ("bench/results", "bench/python/results")
_DATE_IN_NAME = re.compile(r"(\d{4}-\d{2}-\d{2})")
_COMMAND_START = re.compile(r"^(dfsel_bench|dfsel_cpu_bench|dfsel_ggml_bench|\./build|build[-\w]*/|scripts/|"
                            r"CUDA_VISIBLE_DEVICES|DFSEL_|python3 |bench/python/)")
_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def parse_name(name):
    """'ShardTopK/tokens:16/vocab:124160/f32/k:16/manual_time' -> ('ShardTopK', {tokens: 16, ...},
    ('f32',)). Integers become ints; manual_time and iterations:N are dropped."""
    parts = name.split("/")
    params, flags = {}, []
    for p in parts[1:]:
        if p == "manual_time" or p.startswith("iterations:") or p.startswith("repeats:"):
            continue
        if ":" in p:
            k, v = p.split(":", 1)
            params[k] = int(v) if v.isdigit() else v
        else:
            flags.append(p)
    return parts[0], params, tuple(flags)


class Source:
    """One result file: what kind, which GPU, when, and the command that made it."""

    def __init__(self, path, kind, gpu, date, data, root=ROOT):
        self.path = path
        self.rel = os.path.relpath(path, root)
        self.name = os.path.basename(path)
        self.kind = kind
        self.gpu = gpu
        self.date = date  # datetime, UTC
        self.data = data
        self.command = None
        self.order = None  # set by load(): the newest-first sort key

    def day(self):
        return self.date.strftime("%Y-%m-%d")

    def when(self):
        """The date as the file says it: with the time of day when the file has one."""
        if self.date.hour or self.date.minute or self.date.second:
            return self.date.strftime("%Y-%m-%d %H:%M UTC")
        return self.day()


def _utc(text):
    d = dt.datetime.fromisoformat(text)
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.timezone.utc)
    return d.astimezone(dt.timezone.utc)


def _classify(data):
    if isinstance(data, dict) and isinstance(data.get("benchmarks"), list):
        return "gbench"
    if isinstance(data, dict) and isinstance(data.get("rows"), list) and "label_b" in data:
        return "ab"
    if isinstance(data, dict) and isinstance(data.get("against_torch"), list):
        return "torch_step"
    if isinstance(data, dict) and isinstance(data.get("rows"), list) and \
            any(isinstance(r, dict) and "torch_us" in r and "n_draft" in r for r in data["rows"]):
        return "torch_dspark"
    return None


def _gpu_and_date(kind, data, name):
    ctx = data.get("context", {}) if kind in ("gbench", "ab") else {}
    gpu = ctx.get("gpu") if ctx else data.get("device") or data.get("gpu")
    stamp = ctx.get("date") if kind in ("gbench", "ab") else data.get("date")  # bench_step.py's "date"
    date = None
    if isinstance(stamp, str) and stamp:
        date = _utc(stamp)
    else:
        m = _DATE_IN_NAME.search(name)
        if m:
            date = _utc(m.group(1) + "T00:00:00+00:00")
    return gpu, date


def _commit_times(paths):
    """Committer time of the last commit of each path; None for a path not committed."""
    out = {}
    for p in paths:
        try:
            r = subprocess.run(["git", "log", "-1", "--format=%ct", "--", os.path.basename(p)], cwd=os.path.dirname(p),
                               capture_output=True, text=True, timeout=30)
            out[p] = int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else None
        except (OSError, ValueError, subprocess.SubprocessError):
            out[p] = None
    return out


_COMMAND_OF_KIND = {"gbench": ("dfsel_bench", "dfsel_cpu_bench", "dfsel_ggml_bench"), "ab": ("ab-bench.sh",),
                    "torch_step": ("bench_step.py",), "torch_dspark": ("bench_dspark.py",)}


def _readme_command(readme_text, file_name, kind):
    """The first command quoted (in backquotes) after a README names the file: in the rest of that
    paragraph, or in the two paragraphs after it that name no other JSON file. A README may name
    a file without its GPU and date (bench_cpp.json for h200-2026-12-01-bench_cpp.json)."""
    if not readme_text:
        return None
    paragraphs = re.split(r"\n\s*\n", readme_text)
    names = [file_name, re.sub(r"^.*?\d{4}-\d{2}-\d{2}-", "", file_name)]
    for i, para in enumerate(paragraphs):
        hits = [(para.find("`%s`" % n), n) for n in names if "`%s`" % n in para]
        if not hits:
            continue
        at, name = hits[0]
        texts = [para[at + len(name) + 2:]]  # after the span that names the file
        for p in paragraphs[i + 1:i + 3]:
            if ".json" in p:
                break
            texts.append(p)
        for p in texts:
            for span in re.findall(r"`([^`]+)`", p, re.S):
                span = " ".join(span.split())
                if _COMMAND_START.match(span) and " " in span and any(c in span for c in _COMMAND_OF_KIND[kind]):
                    return span
    return None


def _command(src, readmes):
    ctx = src.data.get("context", {}) if src.kind in ("gbench", "ab") else {}
    if ctx.get("command"):  # dfsel_bench --benchmark_context=command=..., bench_topk.py
        return ctx["command"]
    if src.kind in ("torch_step", "torch_dspark") and isinstance(src.data.get("command"), str):
        return src.data["command"]  # bench_step.py records its own
    m = re.search(r"Command: (.*)$", ctx.get("note", ""))
    if m:
        return m.group(1).strip()
    found = _readme_command(readmes.get(os.path.dirname(src.path)), src.name, src.kind)
    if found:
        return found
    if src.kind == "torch_step":
        return "bench/python/bench_step.py --json %s (other arguments not recorded)" % src.name
    if src.kind == "torch_dspark":
        return "bench/python/bench_dspark.py --json %s (other arguments not recorded)" % src.name
    return "%s (arguments not recorded)" % (ctx.get("executable") or "dfsel_bench")


def load(root=ROOT, dirs=RESULT_DIRS):
    """Every result file the plotter can read under root's result folders, newest first."""
    sources, readmes = [], {}
    for d in dirs:
        folder = os.path.join(root, d)
        if not os.path.isdir(folder):
            continue
        readme = os.path.join(folder, "README.md")
        readmes[folder] = open(readme, encoding="utf-8").read() if os.path.exists(readme) else ""
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".json") or "-attempt" in name:
                continue
            path = os.path.join(folder, name)
            try:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
            except (OSError, ValueError):
                continue
            kind = _classify(data)
            if kind is None:
                continue
            if kind == "gbench" and str(data.get("context", {}).get("replays_per_timing", "1")) != "1":
                continue  # timed another way (DFSEL_BENCH_REPLAYS): not beside the others
            gpu, date = _gpu_and_date(kind, data, name)
            if date is None:
                continue
            sources.append(Source(path, kind, gpu, date, data, root))
    commits = _commit_times([s.path for s in sources])
    for s in sources:
        s.command = _command(s, readmes)
        c = commits.get(s.path)
        s.order = (s.date, math.inf if c is None else c, s.name)
    sources.sort(key=lambda s: s.order, reverse=True)
    return sources


def gpus(sources):
    """The GPUs that have results, the one with the newest file first."""
    out = []
    for s in sources:
        if s.gpu and s.gpu not in out:
            out.append(s.gpu)
    return out


def _gbench_rows(data):
    """name -> fields of one Google Benchmark file: the median aggregate where repetitions
    were run, else the iteration row (the median of them when a name repeats). time_us is the
    row's own median counter 'us' where it has one, else real_time in us."""
    by_name, medians = {}, {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            continue
        name = b.get("run_name") or b["name"]
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = b
            continue
        by_name.setdefault(name, []).append(b)
    out = {}
    for name in set(by_name) | set(medians):
        rows = [medians[name]] if name in medians else by_name[name]
        fields = {}
        for k in rows[0]:
            vals = [r[k] for r in rows if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)]
            if len(vals) == len(rows):
                fields[k] = statistics.median(vals)
        scale = _UNIT_US.get(rows[0].get("time_unit", "ns"), 1.0)
        if "real_time" in fields:
            fields["real_time_us"] = fields["real_time"] * scale
        fields["time_us"] = fields["us"] if "us" in fields else fields.get("real_time_us")
        fields["_time_field"] = "us" if "us" in fields else "real_time"
        out[name] = fields
    return out


def _ab_rows(data):
    return {r["name"]: {"b_us": r["b_us"], "time_us": r["b_us"], "_time_field": "b_us"} for r in data["rows"] if "b_us" in r}


class Index:
    """The rows of one GPU's files: lookup(name, field) gives the value from the newest file whose
    row of that name has the field, with where it came from."""

    def __init__(self, sources, gpu):
        self.gpu = gpu
        self.sources = [s for s in sources if s.gpu == gpu]
        self._rows = {}  # name -> [(source, fields)], newest first
        for s in self.sources:
            if s.kind == "gbench":
                rows = _gbench_rows(s.data)
            elif s.kind == "ab":
                rows = _ab_rows(s.data)
            else:
                continue
            for name, fields in rows.items():
                self._rows.setdefault(name, []).append((s, fields))

    def names(self, family=None):
        return sorted(n for n in self._rows if family is None or n.split("/")[0] == family)

    def lookup(self, name, field="time_us"):
        """(value, where) or (None, None); where is field_path()'s record, naming the field of the
        file the value was read from (time_us: the row's 'us', 'real_time' or 'b_us')."""
        for s, fields in self._rows.get(name, ()):
            if fields.get(field) is not None:
                raw = fields["_time_field"] if field == "time_us" else field
                return fields[field], field_path(s, name, raw)
        return None, None

    def source(self, rel):
        return next(s for s in self.sources if s.rel == rel)

    def row(self, name, fields_with):
        """(fields, source) of the newest row of that name with the given field."""
        for s, fields in self._rows.get(name, ()):
            if fields.get(fields_with) is not None:
                return fields, s
        return None, None

    def newest(self, kind):
        for s in self.sources:
            if s.kind == kind:
                return s
        return None


def field_path(source, name, field):
    """Where a plotted value was read from, for the data file written beside each picture."""
    return {"file": source.rel, "row": name, "field": field, "kind": source.kind}
