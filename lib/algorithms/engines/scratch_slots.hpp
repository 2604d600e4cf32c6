#pragma once

// Which ScratchPool slot holds what. The ring phases own the first four; algorithm files use
// the work slots for their own temporaries (never for data a ring phase they call is using).

#include <cstddef>

namespace cohort::algorithms {

enum ScratchSlot : std::size_t {
  kSlotRingReceive0 = 0,     ///< ring phases: incoming chunk of even units
  kSlotRingReceive1 = 1,     ///< ring phases: incoming chunk of odd units
  kSlotRingAccumulate0 = 2,  ///< ring reduce-scatter: partial sums of even steps
  kSlotRingAccumulate1 = 3,  ///< ring reduce-scatter: partial sums of odd steps
  kSlotWork0 = 4,
  kSlotWork1 = 5,
  kSlotWork2 = 6,
};

}  // namespace cohort::algorithms
