#!/usr/bin/env bash
# The known MPICH + UCX over TCP hang, reproduced without FanStore: a C program that only
# calls MPI_Init, MPI_Barrier and MPI_Finalize, run RUNS times under `mpiexec -n RANKS`
# with UCX on TCP over loopback (as tests/runtime/multinode_test.sh forces for its TCP
# path), each run bounded by TIMEOUT seconds. Prints how many finished and how many hung,
# and for a hung run how far its ranks got (each prints a line after MPI_Init, the barrier
# and MPI_Finalize) and the kernel wait of each (/proc/PID/wchan). Shared memory (the
# default transport) runs first, as the control.
# Usage: bench/mpich_tcp_hang.sh [--runs N] [--ranks N] [--timeout S]
set -euo pipefail
runs=12 ranks=4 timeout=30
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    -h | --help) sed -n 2,8p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "mpich_tcp_hang: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
command -v mpicc >/dev/null || { echo "mpich_tcp_hang: mpicc not found (apt-get install libmpich-dev mpich)" >&2; exit 1; }
dir=$(mktemp -d /tmp/fanstore-mpihang-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/barrier.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "rank %d: init done\n", rank);
  MPI_Barrier(MPI_COMM_WORLD);
  fprintf(stderr, "rank %d: barrier done\n", rank);
  MPI_Finalize();
  fprintf(stderr, "rank %d: finalize done\n", rank);
  return 0;
}
C
mpicc -O1 -o "$dir/barrier" "$dir/barrier.c"
ucx=$(dpkg-query -W -f '${Version}' libucx0 2>/dev/null || echo unknown)
echo "mpich_tcp_hang: MPICH $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p'), UCX $ucx, $ranks ranks, $runs runs each, ${timeout} s limit"

trial() {  # trial LABEL [ENV=VALUE...]: runs the program RUNS times, prints the counts
  local label=$1 done=0 hung=0 i pid t p
  shift
  for i in $(seq 1 "$runs"); do
    env "$@" mpiexec -n "$ranks" "$dir/barrier" >"$dir/out" 2>&1 &
    pid=$!
    for t in $(seq 1 $((timeout * 10))); do
      kill -0 $pid 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 $pid 2>/dev/null; then
      hung=$((hung + 1))
      echo "  run $i hung (${timeout} s): $(grep -c 'init done' "$dir/out") of $ranks ranks past MPI_Init," \
        "$(grep -c 'barrier done' "$dir/out") past the barrier, $(grep -c 'finalize done' "$dir/out") past MPI_Finalize"
      for p in $(pgrep -f "^$dir/barrier" || true); do
        echo "    rank pid $p waits in $(cat /proc/$p/wchan 2>/dev/null || echo '?')"
      done
      pkill -KILL -f "$dir/barrier" 2>/dev/null || true
      kill -KILL $pid 2>/dev/null || true
    elif { wait $pid; } 2>/dev/null; then
      done=$((done + 1))
    else
      hung=$((hung + 1))
      echo "  run $i failed: $(tail -1 "$dir/out")"
    fi
    { wait $pid; } 2>/dev/null || true
  done
  echo "$label: $done of $runs finished, $hung hung or failed"
}
# (stderr: bash's notes of the killed runs)
trial "shared memory (default)" 2>/dev/null
trial "UCX over TCP on lo" UCX_TLS=tcp,self UCX_NET_DEVICES=lo 2>/dev/null
