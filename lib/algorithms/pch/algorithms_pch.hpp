#pragma once

// The headers most algorithm files include, precompiled once for the whole library of
// algorithms in the unity builds (CI's sanitizer builds, cohort built as a meson subproject).
// Those builds cannot put the algorithms into unity files (lib/algorithms/meson.build says why),
// and an algorithm file spends most of its unoptimised compile parsing these: 1.2 s per file
// without, 0.35 with (clang, -O0). The main build compiles each file on its own, without this,
// so that a file which forgets an include still fails there.

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
