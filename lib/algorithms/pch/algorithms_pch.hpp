// The headers most algorithm files include, precompiled once for the library of algorithms.
// Its 58 files cannot share unity translation units (lib/algorithms/meson.build says why), and
// each spent most of its compile parsing these: 1.2 s per file without, 0.35 with (clang, -O0);
// 1.3 and 0.45 s with GCC at -O3. The cost: meson force-includes this header, so no build
// checks any more that an algorithm file includes what it uses from these headers itself (a
// build with -Db_pch=false does). Every other file of the library is still compiled on its own
// in the main build. (No include guard: meson compiles it as a file of its own, where GCC
// rejects #pragma once, and force-includes it once per algorithm file.)

#include "algorithms/descriptor.hpp"
#include "algorithms/dispatch.hpp"
#include "algorithms/engines/host_signals.hpp"
#include "algorithms/engines/point_to_point.hpp"
#include "algorithms/engines/ring_pipeline.hpp"
#include "algorithms/engines/scratch_slots.hpp"
#include "algorithms/engines/single_copy.hpp"
#include "core/copy_bytes.hpp"
#include "reduce/reduce.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>
