#!/usr/bin/env bash
# Recreates exp-c2/ (git-ignored) for the next run of the multicast experiment: the sources of fb26f69 with
# cluster2.patch (the 2-CTA multicast kernel) and cluster2-cta-scope.patch (the consumers' remote arrivals at the
# default release.cta semantics and the producer's wait at acquire.cta, as CUTLASS's ClusterBarrier does; the tests'
# N of 1700 made 1704), plus run-c2.sh as exp-c2/run.sh. Then, on the GPU machine (carry exp-c2 and .deps):
#   bash exp-c2/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$(git -C "$here" rev-parse --show-toplevel)"
rm -rf exp-c2
mkdir exp-c2
git archive fb26f69 -- . ':!docs' | tar -x -C exp-c2
git apply --directory=exp-c2 --exclude='exp-c2/docs/*' "$here/cluster2.patch"
git apply --directory=exp-c2 "$here/cluster2-cta-scope.patch"
cp "$here/run-c2.sh" exp-c2/run.sh
echo "exp-c2/ ready: $(find exp-c2 -type f | wc -l) files"
