#!/usr/bin/env bash
# Held-out validation of the model and the simulator on the committed paced-loopback measurements (one H100, link
# profile nvlink4-node8, world 8). CPU only:
#
#   scripts/validate-paced.sh [BUILD_DIR]      (default build; needs the `ovl` CLI: cmake --build BUILD --target ovl)
#
# Inputs (results/h100/): bench_overlap-paced8.json (8 shapes x 3 ops x every mode x comm SMs 8-32), bench_gemm.json
# (the GEMM sweep the calibration reads for the GEMM parameters) and bench_autoplan-paced8.json (14 held-out
# problems, each with the measured times of the plans measured tuning timed).
# 1. splits the overlap cases by shape: held out 4096x8192x4096, 16384x8192x2048 and 8192x4096x8192 (every mode,
#    op and comm SMs) (validation/fit.json, heldout.json);
# 2. calibrates a profile (base: the built-in H100) on the GEMM sweep plus the fit side (profile.json);
# 3. validates it and the built-in profile on the held-out side, and the built-in one on every case;
# 4. ranks the measured candidates of each bench_autoplan problem (each with its plan's JSON) by the simulator on
#    both profiles and takes the pick's measured time;
# 5. writes headline.md. Everything goes to results/h100/validation/.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OVL=$BUILD/apps/ovl
R=results/h100
OUT=$R/validation
[[ -x $OVL ]] || { echo "no $OVL: cmake --build $BUILD --target ovl" >&2; exit 2; }
mkdir -p "$OUT"
HELD='overlap/[^/]+/[^/]+/(4096x8192x4096|16384x8192x2048|8192x4096x8192)/'
python3 scripts/results.py split $R/bench_overlap-paced8.json --held-out "$HELD" --fit "$OUT/fit.json" \
  --test "$OUT/heldout.json"
"$OVL" calibrate "$OUT/fit.json" $R/bench_gemm.json --gpu h100 -o "$OUT/profile.json" | grep -v '^note:' \
  | tee "$OUT/calibrate.txt"
"$OVL" validate --measured "$OUT/heldout.json" --profile "$OUT/profile.json" > "$OUT/validate.txt"
"$OVL" validate --measured "$OUT/heldout.json" --profile "$OUT/profile.json" --json > "$OUT/validate.json"
"$OVL" validate --measured "$OUT/heldout.json" --gpu h100 --json > "$OUT/builtin-heldout.json"
"$OVL" validate --measured $R/bench_overlap-paced8.json --gpu h100 --json > "$OUT/builtin.json"

python3 - "$OVL" "$R/bench_autoplan-paced8.json" "$OUT" <<'PY'
import collections, json, math, os, re, subprocess, sys, tempfile
ovl, autoplan, out = sys.argv[1:]

def ape(r, key):
    return abs(r[key] - r["measured_us"]) / r["measured_us"] * 100

def stats(e):
    e = sorted(e)
    return (len(e), sum(e) / len(e), e[max(1, math.ceil(0.9 * len(e))) - 1], e[-1]) if e else (0, 0, 0, 0)

def signed(rows):
    return sum((r["sim_us"] / r["measured_us"] - 1) * 100 for r in rows) / len(rows) if rows else 0

lines = ["| profile | set | cases | model MAPE % | simulator MAPE % | simulator P90 % | simulator max % | simulator signed % |",
         "|---|---|---:|---:|---:|---:|---:|---:|"]
for label, path in (("calibrated on the fit shapes", "validate.json"), ("built-in H100", "builtin-heldout.json"),
                    ("built-in H100, every shape", "builtin.json")):
    v = json.load(open(f"{out}/{path}"))
    ov = [r for r in v["rows"] if r["kind"] == "overlap"]
    sets = collections.OrderedDict([("all", ov)])
    for mode in ("sequential", "decomposed", "tile-signal", "green-context", "tma"):
        sets[mode] = [r for r in ov if r["name"].split("/")[1] == mode]
    for op in ("gemm-allreduce", "gemm-reducescatter", "allgather-gemm"):
        sets[op] = [r for r in ov if r["name"].split("/")[2] == op]
    if path == "builtin.json":  # every shape: each mode's ops apart too (the signed error says which way)
        for mode in ("sequential", "decomposed", "tile-signal", "green-context", "tma"):
            for op in ("gemm-allreduce", "gemm-reducescatter", "allgather-gemm"):
                sets[f"{mode} {op}"] = [r for r in ov if r["name"].split("/")[1:3] == [mode, op]]
    for k, rows in sets.items():
        n, m, _, _ = stats([ape(r, "model_us") for r in rows])
        _, ms, ps, xs = stats([ape(r, "sim_us") for r in rows])
        lines.append(f"| {label} | {k} | {n} | {m:.1f} | {ms:.1f} | {ps:.1f} | {xs:.1f} | {signed(rows):+.1f} |")
    for by in ("simulator", "model"):
        rk = v[f"ranking_{by}"]
        lines.append(f"| {label} | ranking by the {by}: {rk['problems']} problems | | top-1 "
                     f"{round(rk['top1'] * rk['problems'])} of {rk['problems']} | regret mean "
                     f"{rk['regret_mean'] * 100:.1f}% | max {rk['regret_max'] * 100:.1f}% | | |")

# bench_autoplan: the measured candidates (each with its plan's JSON) ranked by the simulator.
d = json.load(open(autoplan))
alines = ["| profile | problem | candidates | pick (measured us) | best measured us | regret % | pick |",
          "|---|---|---:|---:|---:|---:|---|"]
totals = []
for label, prof in (("calibrated", ["--profile", f"{out}/profile.json"]), ("built-in H100", ["--gpu", "h100"])):
    regrets, top1 = [], 0
    for pr in d["problems"]:
        op, m, n, k, dt, lay, w = re.match(r"([a-z-]+)/(\d+)x(\d+)x(\d+)/(\w+)/(\w+)/world:(\d+)", pr["problem"]).groups()
        args = ["--op", op, "--m", m, "--n", n, "--k", k, "--world", w, "--dtype", dt, "--layout", lay,
                "--loopback", "rank0", "--link-profile", d["context"]["link_profile"]] + prof
        ranked = []
        for c in pr["candidates"]:
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(c["plan_json"], f)
            sim = json.loads(subprocess.run([ovl, "simulate", "--plan", f.name, *args, "--json"], check=True,
                                            capture_output=True, text=True).stdout)
            os.unlink(f.name)
            ranked.append((sim["total_us"], c["measured_us"], c["plan"]))
        pick = min(ranked)
        best = min(c["measured_us"] for c in pr["candidates"])
        regrets.append((pick[1] - best) / best * 100)
        top1 += pick[1] == best
        alines.append(f"| {label} | {pr['problem']} | {len(ranked)} | {pick[1]:.1f} | {best:.1f} | "
                      f"{regrets[-1]:.1f} | {pick[2]} |")
    totals.append(f"| {label} | bench_autoplan: {len(regrets)} problems | | top-1 {top1} of {len(regrets)} | "
                  f"regret mean {sum(regrets) / len(regrets):.1f}% | max {max(regrets):.1f}% | | |")
lines += totals
open(f"{out}/headline.md", "w").write("\n".join(lines) + "\n\n" + "\n".join(alines) + "\n")
print("\n".join(lines))
PY
