#!/usr/bin/env bash
# Held-out validation of the analytical model and the simulator on the committed one-H200 measurements. CPU only:
#
#   scripts/validate-h200.sh [BUILD_DIR]      (default build; needs the `ovl` CLI: cmake --build BUILD --target ovl)
#
# Reads results/h200/bench_gemm.json and results/h200/bench_overlap.json and rewrites results/h200/validation/.
# GEMM_IN=... OVERLAP_IN=... VALIDATION_OUT=... swap in a newer run of the same benchmarks (same case names).
#
# 1. splits the GEMM sweep by shape (every impl -- ovl, ovl-nosignal, cublas -- both layouts, 132..32 SMs):
#      fit      : 8192x8192x8192, 8192x8192x2048, 8192x4096x1024                 -> validation/fit.json
#      held-out : 4096x8192x8192, 2048x8192x4096, 16384x8192x1024                -> validation/heldout.json
# 2. calibrates a profile on the fit shapes only (base: the built-in H200 profile);
# 3. validates that profile on the held-out shapes (text, --json, --plot) and writes headline.md;
# 4. the same for the overlap modes (loopback emulation of rank 0's share, world 8), by shape:
#      fit      : 8192x8192x1024, 8192x8192x4096, 4096x8192x8192 (every mode x comm SMs) + all of the GEMM sweep
#                                                                                -> validation/overlap/fit.json
#      held-out : 8192x8192x2048, 8192x8192x8192, 4096x8192x4096, 16384x8192x2048, 8192x4096x8192
#                                                                                -> validation/overlap/heldout.json
#    and the held-out overlap cases on other profiles (the built-in, fit-only, built-in + operator_gemm_factor).
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OVL=$BUILD/apps/ovl
OUT=${VALIDATION_OUT:-results/h200/validation}
IN=${GEMM_IN:-results/h200/bench_gemm.json}
HELD='gemm/[^/]+/(4096x8192x8192|2048x8192x4096|16384x8192x1024)/'
[[ -x $OVL ]] || { echo "no $OVL: cmake --build $BUILD --target ovl" >&2; exit 2; }
mkdir -p "$OUT/plots"

python3 scripts/results.py split "$IN" --held-out "$HELD" --fit "$OUT/fit.json" --test "$OUT/heldout.json"
"$OVL" calibrate "$OUT/fit.json" --gpu h200 -o "$OUT/profile.json" | tee "$OUT/calibrate.txt"
"$OVL" validate --measured "$OUT/heldout.json" --profile "$OUT/profile.json" --plot "$OUT/plots" > "$OUT/validate.txt"
"$OVL" validate --measured "$OUT/heldout.json" --profile "$OUT/profile.json" --json > "$OUT/validate.json"
# The fit data's own error, for reference only (not the headline).
"$OVL" validate --measured "$OUT/fit.json" --profile "$OUT/profile.json" --json > "$OUT/fit-selfcheck.json"

python3 - "$OUT" <<'PY'
import json, re, sys, collections, math
out = sys.argv[1]
v = json.load(open(f"{out}/validate.json"))
fit = json.load(open(f"{out}/fit-selfcheck.json"))
def stats(rows):
    e = sorted(abs(r["model_us"] - r["measured_us"]) / r["measured_us"] * 100 for r in rows)
    if not e: return (0, 0, 0, 0)
    p90 = e[max(1, math.ceil(0.9 * len(e))) - 1]
    return (len(e), sum(e) / len(e), p90, e[-1])
groups = collections.OrderedDict()
groups["all held-out"] = v["rows"]
for impl in ("ovl", "ovl-nosignal", "cublas"):
    groups[f"impl {impl}"] = [r for r in v["rows"] if r["name"].split("/")[1] == impl]
for s in (132, 128, 124, 116, 100, 64, 32):
    groups[f"sms {s}"] = [r for r in v["rows"] if re.search(rf"/sms:{s}(/|$)", r["name"])]
for shape in ("4096x8192x8192", "2048x8192x4096", "16384x8192x1024"):
    groups[f"shape {shape}"] = [r for r in v["rows"] if f"/{shape}/" in r["name"]]
groups["partitions 32..128 SMs"] = [r for r in v["rows"] if int(re.search(r"sms:(\d+)", r["name"]).group(1)) < 132]
lines = ["| cases | set | MAPE % | P90 % | max % |", "|---|---|---:|---:|---:|"]
for k, rows in groups.items():
    n, m, p, x = stats(rows)
    lines.append(f"| {n} | {k} | {m:.2f} | {p:.2f} | {x:.2f} |")
n, m, p, x = stats(fit["rows"])
lines.append(f"| {n} | (fit shapes, self-check, not held out) | {m:.2f} | {p:.2f} | {x:.2f} |")
open(f"{out}/headline.md", "w").write("\n".join(lines) + "\n")
print("\nHELD-OUT (model never saw these shapes): cases %d  MAPE %.2f%%  P90 %.2f%%  max %.2f%%"
      % (v["cases"], v["mape"], v["p90_ape"], v["max_ape"]))
print("\n".join(lines))
PY
# Per-shape curves: time versus SMs, measured points under the model's curve (bench_gemm has no comm SMs).
python3 - "$OUT" <<'PY'
import json, re, sys, collections
out = sys.argv[1]
v = json.load(open(f"{out}/validate.json"))
series = collections.defaultdict(lambda: collections.defaultdict(list))
for r in v["rows"]:
    m = re.match(r"gemm/([\w-]+)/(\w+)/(nn|nt)/sms:(\d+)", r["name"])
    impl, shape, lay, sms = m.groups()
    series[shape][f"{impl}/{lay}"].append((int(sms), r["measured_us"], r["model_us"]))
colors = {"ovl": "#1f77b4", "ovl-nosignal": "#2ca02c", "cublas": "#d62728"}
for shape, by in series.items():
    W, H, L, R, T, B = 720, 480, 70, 170, 40, 50
    pts = [p for s in by.values() for p in s]
    xmax = 136; ymax = max(max(p[1], p[2]) for p in pts) * 1.08
    X = lambda x: L + (W - L - R) * x / xmax
    Y = lambda y: H - B - (H - T - B) * y / ymax
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W/2}" y="20" text-anchor="middle">{shape} (held out): time vs SMs, points measured, lines model</text>',
           f'<line x1="{L}" y1="{H-B}" x2="{W-R}" y2="{H-B}" stroke="black"/><line x1="{L}" y1="{T}" x2="{L}" y2="{H-B}" stroke="black"/>',
           f'<text x="{(L+W-R)/2}" y="{H-12}" text-anchor="middle">SMs</text>',
           f'<text x="16" y="{(T+H-B)/2}" transform="rotate(-90 16 {(T+H-B)/2})" text-anchor="middle">us per GEMM</text>']
    for x in (0, 32, 64, 100, 132):
        svg.append(f'<text x="{X(x)}" y="{H-B+16}" text-anchor="middle">{x}</text>')
    for i in range(6):
        y = ymax * i / 5
        svg.append(f'<text x="{L-6}" y="{Y(y)+4}" text-anchor="end">{y:.0f}</text>')
    row = 0
    for key in sorted(by):
        impl, lay = key.split("/")
        c = colors[impl]; pts = sorted(by[key])
        dash = ' stroke-dasharray="4 3"' if lay == "nt" else ""
        svg.append(f'<polyline fill="none" stroke="{c}"{dash} points="' + " ".join(f"{X(s):.1f},{Y(p):.1f}" for s, _, p in pts) + '"/>')
        for s, m, _ in pts:
            svg.append(f'<circle cx="{X(s):.1f}" cy="{Y(m):.1f}" r="3" fill="{c}" fill-opacity="0.6"/>')
        svg.append(f'<line x1="{W-R+10}" y1="{T+14+row*18}" x2="{W-R+30}" y2="{T+14+row*18}" stroke="{c}"{dash}/>'
                   f'<text x="{W-R+36}" y="{T+18+row*18}">{key}</text>')
        row += 1
    svg.append("</svg>")
    open(f"{out}/plots/{shape}_sms.svg", "w").write("\n".join(svg) + "\n")
PY
echo "outputs in $OUT/"

# ---- Overlap modes (loopback emulation of rank 0's share, world 8) ----
# fit      : 8192x8192x1024, 8192x8192x4096, 4096x8192x8192 (every mode x comm SMs) + all of bench_gemm
# held-out : 8192x8192x2048, 8192x8192x8192, 4096x8192x4096, 16384x8192x2048, 8192x4096x8192 (10 problems)
# The overlap fit informs the contention weights, the communication kernels' per-CTA rates and the TMA mover's
# per-group cost.
OV=$OUT/overlap
mkdir -p "$OV/plots"
python3 scripts/results.py split "${OVERLAP_IN:-results/h200/bench_overlap.json}" \
  --held-out 'overlap/[^/]+/[^/]+/(8192x8192x2048|8192x8192x8192|4096x8192x4096|16384x8192x2048|8192x4096x8192)/' \
  --fit "$OV/fit.json" --test "$OV/heldout.json"
# Notes are dropped (one per skipped case) except the operator_gemm_factor ones (the per-kernel fits).
"$OVL" calibrate "$OV/fit.json" "$IN" --gpu h200 -o "$OV/profile.json" | awk '!/^note/ || /operator_gemm_factor/' |
  tee "$OV/calibrate.txt"
"$OVL" validate --measured "$OV/heldout.json" --profile "$OV/profile.json" --plot "$OV/plots" > "$OV/validate.txt"
"$OVL" validate --measured "$OV/heldout.json" --profile "$OV/profile.json" --json > "$OV/validate.json"
echo; echo "OVERLAP, HELD-OUT SHAPES:"
python3 scripts/results.py validation "$OV/headline.md" --problems "$OV/validate.json"

# ---- The same held-out overlap cases on other profiles ----
# builtin        : the planner's built-in H200 profile (what `ovl plan` uses)
# fit-only       : calibrated on the overlap fit cases alone (GEMM parameters built in); its fit in calibrate-fit-only.txt
# builtin+factor : the built-in profile with only the fit-only profile's operator_gemm_factor
"$OVL" calibrate "$OV/fit.json" --gpu h200 -o "$OV/profile-fit-only.json" | awk '!/^note/ || /operator_gemm_factor/' \
  > "$OV/calibrate-fit-only.txt"
python3 - "$OV" <<'PY'
import json, sys
out = sys.argv[1]
factor = json.load(open(f"{out}/profile-fit-only.json"))["fit"]["operator_gemm_factor"]
json.dump({"base": "h200", "fit": {"operator_gemm_factor": factor}}, open(f"{out}/profile-builtin-factor.json", "w"),
          indent=1)
PY
for name in builtin fit-only builtin+factor; do
  case $name in
    builtin) args=(--gpu h200) ;;
    fit-only) args=(--profile "$OV/profile-fit-only.json") ;;
    builtin+factor) args=(--profile "$OV/profile-builtin-factor.json") ;;
  esac
  "$OVL" validate --measured "$OV/heldout.json" "${args[@]}" --json > "$OV/validate-$name.json"
done
echo; echo "OVERLAP, HELD-OUT SHAPES, OTHER PROFILES:"
python3 scripts/results.py validation "$OV/other-profiles.md" --label profile builtin="$OV/validate-builtin.json" \
  fit-only="$OV/validate-fit-only.json" builtin+factor="$OV/validate-builtin+factor.json"
