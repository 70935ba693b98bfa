#!/usr/bin/env bash
# Inside a Debian 12 root with Open MPI instead of MPICH (ci/debian-root.sh
# bookworm:openmpi): builds FanStore against Open MPI and runs the suites that start MPI
# ranks (multi-node runs, attach mode, fsbench's MPI mode) with Open MPI's mpiexec, plus
# the unit tests. Open MPI refuses root and more ranks than cores unless told: that is
# set here, for the tests, never in the product.
# Usage: ci/debian-root.sh bookworm:openmpi /src/ci/openmpi-suite.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh --no-torch --openmpi
echo "openmpi-suite: $(mpiexec --version | head -1); $(gcc --version | head -1)"
b=/opt/fanstore-build
rm -rf "$b"  # afresh: a tree kept from a run of another checkout could look up to date
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Debug -DFANSTORE_WERROR=ON -DFANSTORE_BUILD_TESTS=ON >/dev/null
cmake --build "$b" -j"$(nproc)" >"$b.log" 2>&1 || { { grep -E 'error|warning' "$b.log" || true; } | head -30; tail -5 "$b.log"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
ctest --test-dir "$b" -j"$(nproc)" --output-on-failure \
  -R '^(runtime_multinode|runtime_attach|fsbench_integration)$'
