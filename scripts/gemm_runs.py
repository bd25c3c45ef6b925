"""bench_gemm JSON rows, for the gemm_*.py table scripts: the iteration entries grouped by (shape, layout, SMs,
impl), each a list of the entries' dicts in repetition order. A path ending in .gz is read through gzip."""
import collections
import gzip
import json
import re


def gemm_runs(path):
    runs = collections.defaultdict(list)
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        benchmarks = json.load(f)["benchmarks"]
    for b in benchmarks:
        if b.get("run_type") != "iteration":
            continue
        m = re.match(r"gemm/([^/]+)/(\d+x\d+x\d+)/(\w+)/sms:(\d+)", b["name"])
        if m:
            runs[(m.group(2), m.group(3), int(m.group(4)), m.group(1))].append(b)
    return runs
