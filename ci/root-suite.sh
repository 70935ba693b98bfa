#!/usr/bin/env bash
# Inside a Debian root (ci/debian-root.sh): installs the dependencies but PyTorch, Slurm
# and the fuzzing toolchain, builds the Debug configuration with warnings as errors, and
# runs the whole CTest suite. The PyTorch and Slurm tests skip themselves there, saying so
# (python3-torch is 1.2 GB to install in every root, and slurmd in a chroot would share
# the host's; the host's run covers both; the fuzz targets need Debian 12's clang 14). The
# build is made afresh in the root (/opt/fanstore-build: other users run its programs in
# the two-user tests): a tree kept from a run of another checkout could look up to date.
# Usage: ci/debian-root.sh trixie /src/ci/root-suite.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install-deps.sh --no-torch
echo "root-suite: $(. /etc/os-release; echo "$PRETTY_NAME"); $(gcc --version | head -1); $(ldd --version | head -1)"
b=/opt/fanstore-build
rm -rf "$b"
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Debug -DFANSTORE_WERROR=ON -DFANSTORE_BUILD_TESTS=ON >/dev/null
cmake --build "$b" -j"$(nproc)" >"$b.log" 2>&1 || { { grep -E 'error|warning' "$b.log" || true; } | head -30; tail -5 "$b.log"; exit 1; }
ctest --test-dir "$b" -j"$(nproc)" --output-on-failure
