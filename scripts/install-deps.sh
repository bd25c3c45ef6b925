#!/usr/bin/env bash
# Installs the Debian packages ovl builds with, when missing. Idempotent and quiet when nothing is missing.
# The CUDA Toolkit and NCCL are not Debian packages here: they come with the machine (/usr/local/cuda).
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
packages=(cmake ninja-build g++ libfmt-dev libeigen3-dev nlohmann-json3-dev libgtest-dev libgmock-dev
          libbenchmark-dev)
[[ "${OVL_WITH_MPI:-1}" == 1 ]] && packages+=(libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "install-deps: missing ${missing[*]} and no apt-get here; install them by hand" >&2
  exit 1
fi
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
