#!/usr/bin/env bash
# Held-out validation of the model and the simulator on the committed paced-loopback measurements (one H100, link
# profile nvlink4-node8, world 8). CPU only:
#
#   scripts/validate-paced.sh [BUILD_DIR]      (default build; needs the `ovl` CLI: cmake --build BUILD --target ovl)
#
# Inputs (results/h100/): bench_overlap-paced8.json (11 shapes x 3 ops x every mode x comm SMs 8-32), bench_gemm.json
# (the GEMM sweep the calibration reads for the GEMM parameters) and bench_autoplan-paced8.json (14 held-out
# problems, each with the measured times of the plans measured tuning timed).
# 1. splits the overlap cases by shape: held out 4096x8192x4096, 16384x8192x2048, 8192x4096x8192 and, where the file
#    has them, 6144x8192x3072, 12288x4096x4096, 8192x6144x2048 (every mode, op and comm SMs) (validation/fit.json,
#    heldout.json);
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
HELD='overlap/[^/]+/[^/]+/(4096x8192x4096|16384x8192x2048|8192x4096x8192|6144x8192x3072|12288x4096x4096|8192x6144x2048)/'
python3 scripts/results.py split $R/bench_overlap-paced8.json --held-out "$HELD" --fit "$OUT/fit.json" \
  --test "$OUT/heldout.json"
"$OVL" calibrate "$OUT/fit.json" $R/bench_gemm.json --gpu h100 -o "$OUT/profile.json" | grep -v '^note:' \
  | tee "$OUT/calibrate.txt"
"$OVL" validate --measured "$OUT/heldout.json" --profile "$OUT/profile.json" > "$OUT/validate.txt"
"$OVL" validate --measured "$OUT/heldout.json" --profile "$OUT/profile.json" --json > "$OUT/validate.json"
"$OVL" validate --measured "$OUT/heldout.json" --gpu h100 --json > "$OUT/builtin-heldout.json"
"$OVL" validate --measured $R/bench_overlap-paced8.json --gpu h100 --json > "$OUT/builtin.json"

# Every shape's sets per mode and op too (the signed error says which way).
python3 scripts/results.py headline "$OUT/headline.md" --sets all,mode,op --max-signed --rank simulator,model \
  --more-sets "built-in H100, every shape=mode+op" \
  --autoplan $R/bench_autoplan-paced8.json --ovl "$OVL" \
  --autoplan-profile "calibrated=--profile $OUT/profile.json" --autoplan-profile "built-in H100=--gpu h100" \
  "calibrated on the fit shapes=$OUT/validate.json" "built-in H100=$OUT/builtin-heldout.json" \
  "built-in H100, every shape=$OUT/builtin.json"
