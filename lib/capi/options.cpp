// Reading the C ABI's option structs and enums (see options.hpp for the struct_size rule).

#include "capi/options.hpp"

#include "capi/status.hpp"

#include <cohort/algorithm.hpp>
#include <cohort/dtype.hpp>
#include <cohort/work.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>

namespace cohort::capi {
namespace {

// No option struct will ever approach this; a larger struct_size means the caller never set it.
constexpr std::size_t kMaxStructSize = 4096;

// The C enums are numbered in the C++ enums' declaration order; these pin that down so a new
// C++ enumerator cannot silently shift the ABI.
static_assert(static_cast<int>(ReduceOp::Sum) == COHORT_SUM);
static_assert(static_cast<int>(ReduceOp::Prod) == COHORT_PROD);
static_assert(static_cast<int>(ReduceOp::Min) == COHORT_MIN);
static_assert(static_cast<int>(ReduceOp::Max) == COHORT_MAX);
static_assert(static_cast<int>(ReduceOp::Avg) == COHORT_AVG);
static_assert(static_cast<int>(ReduceOp::BAnd) == COHORT_BAND);
static_assert(static_cast<int>(ReduceOp::BOr) == COHORT_BOR);
static_assert(static_cast<int>(ReduceOp::BXor) == COHORT_BXOR);
static_assert(static_cast<int>(Algorithm::Auto) == COHORT_ALGORITHM_AUTO);
static_assert(static_cast<int>(Algorithm::Ring) == COHORT_ALGORITHM_RING);
static_assert(static_cast<int>(Algorithm::RecursiveDoubling) ==
              COHORT_ALGORITHM_RECURSIVE_DOUBLING);
static_assert(static_cast<int>(Algorithm::Rabenseifner) == COHORT_ALGORITHM_RABENSEIFNER);
static_assert(static_cast<int>(Algorithm::Tree) == COHORT_ALGORITHM_TREE);
static_assert(static_cast<int>(Algorithm::ScatterAllgather) == COHORT_ALGORITHM_SCATTER_ALLGATHER);
static_assert(static_cast<int>(Algorithm::ReduceScatterGather) ==
              COHORT_ALGORITHM_REDUCE_SCATTER_GATHER);
static_assert(static_cast<int>(Algorithm::Bruck) == COHORT_ALGORITHM_BRUCK);
static_assert(static_cast<int>(Algorithm::RecursiveHalving) == COHORT_ALGORITHM_RECURSIVE_HALVING);
static_assert(static_cast<int>(Algorithm::Pairwise) == COHORT_ALGORITHM_PAIRWISE);
static_assert(static_cast<int>(Algorithm::Dissemination) == COHORT_ALGORITHM_DISSEMINATION);
static_assert(static_cast<int>(Algorithm::SharedMemory) == COHORT_ALGORITHM_SHARED_MEMORY);
static_assert(static_cast<int>(Algorithm::Hierarchical) == COHORT_ALGORITHM_HIERARCHICAL);
static_assert(static_cast<int>(Algorithm::SingleCopy) == COHORT_ALGORITHM_SINGLE_COPY);
static_assert(kAlgorithmCount == COHORT_ALGORITHM_SINGLE_COPY + 1);

// Validates struct_size and says whether the caller's struct contains the field that ends at
// `field_end` (offsetof + sizeof).
class Fields {
 public:
  Fields(std::size_t struct_size, const char* function, const char* type) : size_(struct_size) {
    if (struct_size < sizeof(std::size_t) || struct_size > kMaxStructSize) {
      invalid_argument(function, std::string(type) + ".struct_size is " +
                                     std::to_string(struct_size) +
                                     "; initialise the struct with its *_INIT macro or "
                                     "*_options_init() function");
    }
  }
  bool has(std::size_t field_end) const { return field_end <= size_; }

 private:
  std::size_t size_;
};

std::optional<std::chrono::milliseconds> timeout_of(std::int64_t timeout_ms, const char* function,
                                                    const char* field) {
  if (timeout_ms < 0) {
    invalid_argument(function, std::string(field) + " is " + std::to_string(timeout_ms) +
                                   " ms; pass 0 for the default or a positive deadline");
  }
  if (timeout_ms > kMaxTimeout.count()) {
    invalid_argument(function, std::string(field) + " is " + std::to_string(timeout_ms) +
                                   " ms, more than one year (" +
                                   std::to_string(kMaxTimeout.count()) + " ms)");
  }
  if (timeout_ms == 0) return std::nullopt;
  return std::chrono::milliseconds(timeout_ms);
}

Algorithm algorithm_of(int value, const char* function) {
  if (value < COHORT_ALGORITHM_AUTO || value >= kAlgorithmCount) {
    invalid_argument(function, "options.algorithm " + std::to_string(value) +
                                   " is not a cohort_algorithm_t value");
  }
  return static_cast<Algorithm>(value);
}

}  // namespace

CollectiveOptions collective_options(const cohort_collective_options_t* options,
                                     const char* function) {
  CollectiveOptions result;
  if (options == nullptr) return result;
  const Fields fields(options->struct_size, function, "cohort_collective_options_t");
  if (fields.has(offsetof(cohort_collective_options_t, timeout_ms) + sizeof(options->timeout_ms)))
    result.timeout = timeout_of(options->timeout_ms, function, "options.timeout_ms");
  if (fields.has(offsetof(cohort_collective_options_t, algorithm) + sizeof(options->algorithm)))
    result.algorithm = algorithm_of(options->algorithm, function);
  // has_stream lies where the older struct had its tail padding (an int32 after the enum), so
  // only a struct large enough to hold `stream` is known to have set it: both are read or none.
  if (fields.has(offsetof(cohort_collective_options_t, stream) + sizeof(options->stream)) &&
      options->has_stream != 0)
    result.stream = Stream{options->stream};
  return result;
}

InitOptions init_options(const cohort_init_options_t* options, const char* function) {
  InitOptions result;
  if (options == nullptr) return result;
  const Fields fields(options->struct_size, function, "cohort_init_options_t");
  if (fields.has(offsetof(cohort_init_options_t, timeout_ms) + sizeof(options->timeout_ms)))
    result.communicator.timeout = timeout_of(options->timeout_ms, function, "options.timeout_ms");
  return result;
}

ReduceOp reduce_op(int value, const char* function) {
  if (value < COHORT_SUM || value > COHORT_BXOR) {
    invalid_argument(function, "reduce op " + std::to_string(value) +
                                   " is not a cohort_reduce_op_t value (COHORT_SUM ... "
                                   "COHORT_BXOR)");
  }
  return static_cast<ReduceOp>(value);
}

}  // namespace cohort::capi

namespace {

// The sized initialisers: the library's defaults, as much of them as the caller's struct holds.
template <class Options>
cohort_status_t initialise(const char* function, Options* options, std::size_t struct_size,
                           const Options& defaults, const char* type) {
  return cohort::capi::guarded(function, [&] {
    cohort::capi::require_out(options, function, "options");
    if (struct_size < sizeof(std::size_t) || struct_size > cohort::capi::kMaxStructSize) {
      cohort::capi::invalid_argument(function, "struct_size " + std::to_string(struct_size) +
                                                   " is not the size of a " + type +
                                                   " (pass sizeof: cohort_*_options_init() does)");
    }
    std::memset(static_cast<void*>(options), 0, struct_size);
    const std::size_t known = std::min(struct_size, sizeof(Options));
    std::memcpy(static_cast<void*>(options), &defaults, known);
    options->struct_size = known;
  });
}

}  // namespace

extern "C" {

cohort_status_t cohort_init_options_init_sized(cohort_init_options_t* options, size_t struct_size) {
  return initialise("cohort_init_options_init", options, struct_size,
                    cohort_init_options_t COHORT_INIT_OPTIONS_INIT, "cohort_init_options_t");
}

cohort_status_t cohort_collective_options_init_sized(cohort_collective_options_t* options,
                                                     size_t struct_size) {
  return initialise("cohort_collective_options_init", options, struct_size,
                    cohort_collective_options_t COHORT_COLLECTIVE_OPTIONS_INIT,
                    "cohort_collective_options_t");
}

}  // extern "C"
