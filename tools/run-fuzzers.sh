#!/usr/bin/env bash
# Builds the libFuzzer harnesses of test/fuzz with clang (ASan + UBSan, libraries instrumented for
# coverage) in a build directory of their own (CI builds and runs the unit suite there too), and
# runs each as a meson test of the 'fuzz' suite for the bounded time test/fuzz/meson.build sets,
# starting from the checked-in seed corpus.
#
#   tools/run-fuzzers.sh [build-dir]          (default build-fuzz)
#   tools/run-fuzzers.sh build-fuzz -- --test-args=-max_total_time=600 -t 20   (a longer run)
#   tools/run-fuzzers.sh build-san --setup    (only configure; CI builds and runs the unit suite
#                                              in the same directory before fuzzing)
#   tools/run-fuzzers.sh build-san --build    (configure if needed and build the harnesses, but
#                                              do not run them: CI builds them in the background)
#
# Needs Debian's clang and libclang-rt-14-dev (libFuzzer and the sanitizer runtimes). Only the
# harnesses and the static libraries they link are built: not libcohort.so, the tools, the bench
# or the other tests. A failing harness leaves its crashing input in
# <build-dir>/test/fuzz/artifacts/; turn it into a unit test beside the code it exercises.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-fuzz
case "${1:-}" in
  "" | --*) ;;
  *) dir=$1; shift ;;
esac
setup_only=false
build_only=false
[ "${1:-}" = "--setup" ] && { setup_only=true; shift; }
[ "${1:-}" = "--build" ] && { build_only=true; shift; }
[ "${1:-}" = "--" ] && shift

if [ ! -f "$dir/build.ninja" ]; then
  # GPU, Python, MPI and Gloo are not needed by any harness nor by the unit suite: leaving them
  # out keeps the configuration independent of CUDA's and pybind11's support for clang. The bench
  # and tools stay configured for their unit tests (nothing builds them unless asked). A unity
  # build (a few files per translation unit) compiles in three quarters of the time. Warnings are
  # errors, as in the main build: clang's differ from GCC's. Unoptimised: CI's targets built in
  # 271 s instead of 424 at -O2 (2026-11-28, 2 cores); the unit suite then ran in 34 s instead of
  # about 18, and a harness ran 2-3x fewer inputs in its bounded time (3 thousand to 210 thousand).
  # For a long local run, optimise first: meson configure <build-dir> -Doptimization=2. (These
  # settings apply when the directory is first configured; one configured earlier keeps its own.)
  # Line tables instead of full debug information: the sanitizers' reports still name file and
  # line, and a unity file compiled in 7.9 s instead of 8.5 (6.9 with none). Asserts stay on
  # (the project's b_ndebug=if-release defines NDEBUG for buildtype=plain too).
  CC=clang CXX=clang++ meson setup "$dir" --unity on --werror -Dfuzz=true \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcpp_args="-fsanitize=fuzzer-no-link -gline-tables-only" -Dc_args=-gline-tables-only \
    -Dbuildtype=plain -Doptimization=0 -Db_ndebug=false \
    -Dcuda=disabled -Dpython=disabled -Dmpi=disabled -Dgloo=disabled
fi
$setup_only && exit 0
mapfile -t targets < <(for source in test/fuzz/*_fuzzer.cpp; do
  name=$(basename "$source" .cpp)
  echo "test/fuzz/$name"
done)
ninja -C "$dir" "${targets[@]}"
$build_only && exit 0
meson test -C "$dir" --no-rebuild --print-errorlogs --suite fuzz "$@"
