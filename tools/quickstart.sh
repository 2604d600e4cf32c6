#!/usr/bin/env bash
# README's first command: install what is missing, build, and run the main job — the allreduce
# benchmark across 2 local ranks (more with NPROC=N) — on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
# meson finds nvcc (for the GPU training kernels) through CUDACXX or PATH; the toolkit is not on
# PATH by default (/usr/local/cuda is meson's gpu_toolkit_dir default).
if [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

tools/install-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
build/tools/cohort_run/cohort-run -n "${NPROC:-2}" -- build/bench/cohort_bench/cohort-bench "$@"
