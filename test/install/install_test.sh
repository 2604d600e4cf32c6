#!/bin/sh
# Installs the build into a temporary DESTDIR, then builds and runs consumers against the
# installed tree only, one per way an engine consumes cohort:
#   - pkg-config: a C++20 program (cohort.hpp) and the C ABI's multi-rank test program
#     (test/capi, plain C11 with -std=c11 -Wall -Wextra -pedantic -Werror against cohort.h), run
#     under the installed cohort-run at 1 and 3 ranks;
#   - CMake: find_package(cohort) and the imported target cohort::cohort, both programs;
#   - meson: dependency('cohort'), found through the installed cohort.pc.
# Each compile's complete header closure (compiler -M output) must come from the install tree
# or the C/C++ system libraries (plus <dlpack/dlpack.h> for cohort.h, which is its interface),
# never from UCX, NCCL, CUDA, spdlog or fmt, nor from the source tree.
#
# With --meson-subproject, instead builds the meson consumer with cohort as a subproject
# (dependency('cohort') falling back to the source tree, with tests, benchmarks, tools, Python
# and CUDA off) and runs it in a world of one. That compiles libcohort again, so it runs in the
# 'slow' suite, on every core (meson runs it alone), and as cheaply as a real build allows: what
# it checks is how cohort builds and links as a subproject, not its code generation. So the
# subproject is unoptimised (-O3 took four times as long), without debug info, and a unity build
# (meson's unity=subprojects: a directory's files compiled as one translation unit, except the
# algorithms, which opt out): 2 minutes down to under one on 2 cores. Warnings are not errors in
# the subproject (the main build has -Werror): under unity GCC's -Wsubobject-linkage flags every
# class that holds a type from an anonymous namespace, as if each .cpp were a header. A unity
# build does fail when two files of one library define the same internal name: give such helpers
# distinct names, or one shared definition (core/invalid_argument.hpp).
#
# Usage: install_test.sh <build dir> <source dir> [--meson-subproject]
set -eu

build_dir=$1
source_dir=$2
mode=${3:-}
cxx=${CXX:-c++}
cc=${CC:-cc}

fail() {
  echo "install_test: FAIL: $*" >&2
  exit 1
}

# meson test points LD_LIBRARY_PATH at the build tree; the consumers must load the installed
# library (through their rpath, or LD_LIBRARY_PATH set to the staged libdir below).
unset LD_LIBRARY_PATH

work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
destdir=$work/destdir
capi_dir=$source_dir/test/capi
capi_sources="capi_collectives_main.c capi_collectives.c capi_async.c capi_errors.c"
c_flags="-std=c11 -Wall -Wextra -pedantic -Werror"

# ---- The consumers' sources -------------------------------------------------------------------

# A C++ consumer that touches the public API: Buffer, pad, concat, DLPack, dtype names, errors,
# and the training layer's installed headers (a cast, Philox's first known answer).
cat > "$work/consumer.cpp" <<'CPP'
#include <cohort/cohort.hpp>
#include <cohort/train.hpp>

#include <cstdio>
#include <vector>

int main() {
  using namespace cohort;
  Buffer rows = Buffer::allocate({2, 3}, DType::Int32);
  for (int i = 0; i < 6; ++i) rows.data_as<int>()[i] = i + 1;
  Buffer padded = rows.pad(1, 4, -1.0);
  std::vector<Buffer> parts{padded, padded.slice(1, 2)};
  Buffer joined = Buffer::concat(parts);
  const int expected[] = {1, 2, 3, -1, 4, 5, 6, -1, 4, 5, 6, -1};
  if (joined.count() != 12) return std::printf("count %zu\n", joined.count()), 1;
  for (int i = 0; i < 12; ++i)
    if (joined.data_as<int>()[i] != expected[i]) return std::printf("element %d\n", i), 1;
  Buffer back = from_dlpack(to_dlpack(joined));
  if (back.data() != joined.data()) return std::puts("dlpack copied"), 1;
  if (dtype_name(back.dtype()) != "int32") return std::puts("dtype name"), 1;
  try {
    joined.pad(0, 1);
    return std::puts("pad accepted a smaller size"), 1;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::InvalidArgument) return std::puts("wrong error code"), 1;
  }
  float wide[2] = {65519.0f, 65520.0f};
  Buffer half = train::cast_to(Buffer::view(wide, 2, DType::Float32), DType::Float16);
  if (half.data_as<unsigned short>()[0] != 0x7bff || half.data_as<unsigned short>()[1] != 0x7c00)
    return std::puts("f16 cast"), 1;
  if (train::philox4x32_10({0, 0, 0, 0}, {0, 0})[0] != 0x6627e8d5u) return std::puts("philox"), 1;
  std::printf("cohort %s consumer ok\n", kVersion);
  return 0;
}
CPP

# The meson consumer: both programs through dependency('cohort'), which finds the installed
# cohort.pc, or (with --force-fallback-for=cohort) builds cohort as a subproject.
write_meson_consumer() {
  dir=$1
  mkdir -p "$dir"
  cp "$work/consumer.cpp" "$dir/"
  for f in $capi_sources capi_test.h; do cp "$capi_dir/$f" "$dir/"; done
  cat > "$dir/meson.build" <<MESON
project('cohort_meson_consumer', 'c', 'cpp', meson_version: '>= 1.0.1',
  default_options: ['c_std=c11', 'cpp_std=c++20', 'warning_level=3', 'werror=true'])
cohort_dep = dependency('cohort', fallback: ['cohort', 'cohort_dep'])
executable('capi_consumer', '$(echo "$capi_sources" | sed "s/ /', '/g")', dependencies: cohort_dep)
executable('cpp_consumer', 'consumer.cpp', dependencies: cohort_dep)
MESON
}

# Checks a -M dependency listing: nothing private, nothing from the source tree's headers.
check_header_closure() {
  deps=$1
  what=$2
  forbidden=$(tr ' \\' '\n\n' < "$deps" | grep -E '/(ucp|uct|ucs|spdlog|fmt)/|nccl|cuda' || true)
  [ -z "$forbidden" ] || fail "$what: public headers pull in private dependencies:
$forbidden"
  from_source=$(tr ' \\' '\n\n' < "$deps" | grep -F "$source_dir/" \
    | grep -v -e consumer.cpp -e "$capi_dir/" || true)
  [ -z "$from_source" ] || fail "$what: headers came from the source tree, not the install:
$from_source"
}

# The program must load libcohort from the staged install, not from the build tree.
check_loads_installed() {
  ldd "$1" | grep -q "libcohort.so.* => $libdir/" \
    || fail "$1 does not load libcohort from $libdir:
$(ldd "$1")"
}

# Runs `program` under `launcher -n ranks` and expects every rank to report ok.
run_ranks() {
  launcher=$1
  ranks=$2
  program=$3
  output=$("$launcher" -n "$ranks" --timeout 150 -- "$program" 2>&1) \
    || fail "$program at $ranks ranks exited with $?:
$output"
  oks=$(echo "$output" | grep -c "capi_collectives_test: rank .* ok" || true)
  [ "$oks" -eq "$ranks" ] || fail "$program at $ranks ranks: $oks of $ranks ranks ok:
$output"
  echo "install_test: C ABI program ok at $ranks ranks ($program)"
}

# ---- --meson-subproject: cohort built from source inside a consumer ---------------------------

if [ "$mode" = "--meson-subproject" ]; then
  consumer=$work/meson-subproject
  write_meson_consumer "$consumer"
  mkdir -p "$consumer/subprojects"
  ln -s "$source_dir" "$consumer/subprojects/cohort"
  meson setup "$consumer/build" "$consumer" --force-fallback-for=cohort \
    -Dcohort:tests=false -Dcohort:bench=false -Dcohort:tools=false -Dcohort:python=disabled \
    -Dcohort:cuda=disabled -Dcohort:optimization=0 -Ddebug=false -Dunity=subprojects \
    -Dunity_size=64 -Dcohort:werror=false > "$work/meson-setup.log" 2>&1 \
    || fail "meson setup with cohort as a subproject failed:
$(tail -n 30 "$work/meson-setup.log")"
  grep -q "Subproject cohort" "$work/meson-setup.log" \
    || fail "meson did not build cohort as a subproject:
$(cat "$work/meson-setup.log")"
  ninja -C "$consumer/build" > "$work/meson-build.log" 2>&1 \
    || fail "building the consumer with cohort as a subproject failed:
$(tail -n 30 "$work/meson-build.log")"
  # A world of one (no launcher): the C program runs every check at size 1.
  output=$("$consumer/build/capi_consumer" 2>&1) || fail "capi_consumer exited with $?: $output"
  echo "$output"
  output=$("$consumer/build/cpp_consumer") || fail "cpp_consumer exited with $?: $output"
  echo "$output"
  echo "install_test: meson subproject consumer ok"
  exit 0
fi

# ---- 1. Install exactly what a package would ship ---------------------------------------------

meson install -C "$build_dir" --destdir "$destdir" --no-rebuild --quiet \
  || fail "meson install into $destdir failed"

pc_file=$(find "$destdir" -name cohort.pc -path '*pkgconfig*' | head -n 1)
[ -n "$pc_file" ] || fail "no cohort.pc installed under $destdir"
pc_dir=$(dirname "$pc_file")
export PKG_CONFIG_PATH="$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

# cohort.pc names the final prefix (e.g. /usr/local); rebase it into the DESTDIR.
prefix=$(pkg-config --variable=prefix cohort) || fail "pkg-config cannot read $pc_file"
staged_prefix=$destdir$prefix
for header in cohort.hpp cohort.h; do
  [ -n "$(find "$staged_prefix" -path "*/cohort/$header" | head -n 1)" ] \
    || fail "cohort/$header is not installed under $staged_prefix"
done
cflags=$(pkg-config --define-variable=prefix="$staged_prefix" --cflags cohort)
libs=$(pkg-config --define-variable=prefix="$staged_prefix" --libs cohort)
libdir=$(pkg-config --define-variable=prefix="$staged_prefix" --variable=libdir cohort)
case "$cflags $libs" in
  *"$source_dir"*) fail "pkg-config flags point into the source tree: $cflags $libs" ;;
esac
cohort_run=$staged_prefix/bin/cohort-run
[ -x "$cohort_run" ] || fail "cohort-run is not installed at $cohort_run"

# ---- 2. pkg-config: the C++ consumer ----------------------------------------------------------

# shellcheck disable=SC2086  # the flags are word lists
"$cxx" -std=c++20 -Wall -Wextra -Werror $cflags -M "$work/consumer.cpp" > "$work/deps.txt" \
  || fail "preprocessing against the installed headers failed"
check_header_closure "$work/deps.txt" "C++ consumer"
grep -q "$staged_prefix/.*cohort/cohort.hpp" "$work/deps.txt" \
  || fail "cohort/cohort.hpp was not taken from $staged_prefix"
# cohort.hpp must not need dlpack.h: only the C ABI's header exposes DLPack's structs.
! tr ' \\' '\n\n' < "$work/deps.txt" | grep -q '/dlpack/dlpack.h' \
  || fail "cohort.hpp includes dlpack.h"

# shellcheck disable=SC2086
"$cxx" -std=c++20 -Wall -Wextra -Werror $cflags "$work/consumer.cpp" -o "$work/consumer" \
  $libs "-Wl,-rpath,$libdir" || fail "building the consumer against the install failed"
output=$("$work/consumer") || fail "consumer exited with $?: $output"
echo "$output"
case "$output" in
  *"consumer ok"*) ;;
  *) fail "unexpected consumer output: $output" ;;
esac

# ---- 3. pkg-config: the C ABI program, C11 only ----------------------------------------------

capi_paths=""
for f in $capi_sources; do capi_paths="$capi_paths $capi_dir/$f"; done
: > "$work/c-deps.txt"
for f in $capi_paths; do
  # shellcheck disable=SC2086
  "$cc" $c_flags $cflags -M "$f" >> "$work/c-deps.txt" \
    || fail "preprocessing $f against the installed cohort.h failed"
done
check_header_closure "$work/c-deps.txt" "C consumer"
grep -Eq "$staged_prefix/.*cohort/cohort\.h( |$)" "$work/c-deps.txt" \
  || fail "cohort/cohort.h was not taken from $staged_prefix"
# shellcheck disable=SC2086
"$cc" $c_flags $cflags $capi_paths -o "$work/capi_consumer" $libs "-Wl,-rpath,$libdir" \
  || fail "building the C ABI program with $c_flags against the install failed"
check_loads_installed "$work/capi_consumer"
run_ranks "$cohort_run" 1 "$work/capi_consumer"
run_ranks "$cohort_run" 3 "$work/capi_consumer"

# ---- 4. CMake: find_package(cohort), target cohort::cohort -----------------------------------

if command -v cmake > /dev/null 2>&1; then
  cmake_src=$work/cmake-consumer
  mkdir -p "$cmake_src"
  cp "$work/consumer.cpp" "$cmake_src/"
  for f in $capi_sources capi_test.h; do cp "$capi_dir/$f" "$cmake_src/"; done
  version=$(pkg-config --modversion cohort)
  cat > "$cmake_src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(cohort_cmake_consumer LANGUAGES C CXX)
find_package(cohort $version REQUIRED)
if(NOT cohort_DIR MATCHES "^$destdir/")
  message(FATAL_ERROR "found cohort in \${cohort_DIR}, not in the staged install")
endif()
add_executable(capi_consumer $capi_sources)
set_target_properties(capi_consumer PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON
  C_EXTENSIONS OFF)
target_compile_options(capi_consumer PRIVATE -Wall -Wextra -pedantic -Werror)
target_link_libraries(capi_consumer PRIVATE cohort::cohort)
add_executable(cpp_consumer consumer.cpp)
set_target_properties(cpp_consumer PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
target_compile_options(cpp_consumer PRIVATE -Wall -Wextra -Werror)
target_link_libraries(cpp_consumer PRIVATE cohort::cohort)
CMAKE
  cmake -S "$cmake_src" -B "$cmake_src/build" -DCMAKE_PREFIX_PATH="$staged_prefix" \
    -DCMAKE_BUILD_TYPE=Release > "$work/cmake-configure.log" 2>&1 \
    || fail "cmake could not configure the consumer with find_package(cohort):
$(tail -n 30 "$work/cmake-configure.log")"
  cmake --build "$cmake_src/build" -j 1 > "$work/cmake-build.log" 2>&1 \
    || fail "cmake could not build the consumer against cohort::cohort:
$(tail -n 30 "$work/cmake-build.log")"
  output=$("$cmake_src/build/cpp_consumer") || fail "CMake cpp_consumer exited with $?: $output"
  echo "$output (CMake)"
  check_loads_installed "$cmake_src/build/capi_consumer"
  run_ranks "$cohort_run" 2 "$cmake_src/build/capi_consumer"
else
  fail "cmake is not installed; the CMake package cannot be checked (tools/install-deps.sh)"
fi

# ---- 5. meson: dependency('cohort') through the installed cohort.pc --------------------------

# The sysroot makes pkg-config prefix the installed paths with the DESTDIR, for meson too.
consumer=$work/meson-consumer
write_meson_consumer "$consumer"
PKG_CONFIG_SYSROOT_DIR=$destdir meson setup "$consumer/build" "$consumer" \
  --wrap-mode=nofallback > "$work/meson-setup.log" 2>&1 \
  || fail "meson setup of the consumer with dependency('cohort') failed:
$(tail -n 30 "$work/meson-setup.log")"
grep -q "Run-time dependency cohort found: YES" "$work/meson-setup.log" \
  || fail "meson did not find the installed cohort:
$(cat "$work/meson-setup.log")"
PKG_CONFIG_SYSROOT_DIR=$destdir ninja -C "$consumer/build" -j 1 > "$work/meson-build.log" 2>&1 \
  || fail "meson could not build the consumer:
$(tail -n 30 "$work/meson-build.log")"
LD_LIBRARY_PATH=$libdir "$consumer/build/cpp_consumer" > /dev/null \
  || fail "meson cpp_consumer failed"
output=$(LD_LIBRARY_PATH=$libdir "$consumer/build/capi_consumer" 2>&1) \
  || fail "meson capi_consumer exited with $?: $output"
echo "$output (meson)"

echo "install_test: ok (prefix $prefix staged in $destdir)"
