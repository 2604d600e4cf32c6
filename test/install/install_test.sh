#!/bin/sh
# Installs the build into a temporary DESTDIR, then builds and runs a small program against the
# installed headers and cohort.pc only. Proves that the public API is self-contained: the
# program's complete header closure (compiler -M output) must come from the install tree or the
# C/C++ system libraries, never from UCX, NCCL, CUDA, spdlog, fmt or dlpack, nor from the source
# tree.
#
# Usage: install_test.sh <build dir> <source dir>
set -eu

build_dir=$1
source_dir=$2
cxx=${CXX:-c++}

fail() {
  echo "install_test: FAIL: $*" >&2
  exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
destdir=$work/destdir

# 1. Install exactly what a package would ship.
meson install -C "$build_dir" --destdir "$destdir" --no-rebuild --quiet \
  || fail "meson install into $destdir failed"

pc_file=$(find "$destdir" -name cohort.pc -path '*pkgconfig*' | head -n 1)
[ -n "$pc_file" ] || fail "no cohort.pc installed under $destdir"
pc_dir=$(dirname "$pc_file")
export PKG_CONFIG_PATH="$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

# 2. cohort.pc names the final prefix (e.g. /usr/local); rebase it into the DESTDIR.
prefix=$(pkg-config --variable=prefix cohort) || fail "pkg-config cannot read $pc_file"
staged_prefix=$destdir$prefix
[ -f "$staged_prefix/include/cohort/cohort.hpp" ] \
  || [ -n "$(find "$staged_prefix" -path '*/cohort/cohort.hpp' | head -n 1)" ] \
  || fail "cohort/cohort.hpp is not installed under $staged_prefix"
cflags=$(pkg-config --define-variable=prefix="$staged_prefix" --cflags cohort)
libs=$(pkg-config --define-variable=prefix="$staged_prefix" --libs cohort)
libdir=$(pkg-config --define-variable=prefix="$staged_prefix" --variable=libdir cohort)
case "$cflags $libs" in
  *"$source_dir"*) fail "pkg-config flags point into the source tree: $cflags $libs" ;;
esac

# 3. A consumer that touches the public API: Buffer, pad, concat, DLPack, dtype names, errors,
#    and the training layer's installed headers (a cast, Philox's first known answer).
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

# shellcheck disable=SC2086  # the flags are word lists
"$cxx" -std=c++20 -Wall -Wextra -Werror $cflags -M "$work/consumer.cpp" > "$work/deps.txt" \
  || fail "preprocessing against the installed headers failed"
forbidden=$(tr ' \\' '\n\n' < "$work/deps.txt" \
  | grep -E '/(ucp|uct|ucs|spdlog|fmt|dlpack)/|nccl|cuda' || true)
[ -z "$forbidden" ] || fail "public headers pull in private dependencies:
$forbidden"
from_source=$(tr ' \\' '\n\n' < "$work/deps.txt" | grep -F "$source_dir/" | grep -v consumer.cpp || true)
[ -z "$from_source" ] || fail "headers came from the source tree, not the install:
$from_source"
grep -q "$staged_prefix/.*cohort/cohort.hpp" "$work/deps.txt" \
  || fail "cohort/cohort.hpp was not taken from $staged_prefix"

# shellcheck disable=SC2086
"$cxx" -std=c++20 -Wall -Wextra -Werror $cflags "$work/consumer.cpp" -o "$work/consumer" \
  $libs "-Wl,-rpath,$libdir" || fail "building the consumer against the install failed"
output=$("$work/consumer") || fail "consumer exited with $?: $output"
echo "$output"
case "$output" in
  *"consumer ok"*) ;;
  *) fail "unexpected consumer output: $output" ;;
esac
echo "install_test: ok (prefix $prefix staged in $destdir)"
