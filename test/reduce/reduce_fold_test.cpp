// reduce::fold_to_all against the scalar reference in reduce_reference.hpp, chained one input at
// a time as reduce_to + reduce_into would round: every op on every dtype on every ISA this CPU
// runs, 2-5 inputs into 1-3 outputs, cached and streaming stores (from the start, and after a
// head that aligns the outputs), outputs aligned alike and not,
// in place, counts around the block and alignment boundaries, and the bytes around every output
// left untouched. Then its refusals, which must come before any output byte is written.

#include <catch2/catch.hpp>
#include <cohort/error.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "isa_restorer.hpp"
#include "reduce/dispatch.hpp"
#include "reduce/reduce.hpp"
#include "reduce_reference.hpp"

namespace cohort::reduce::testing {
namespace {

/// `size` bytes at `offset` past a 64-byte boundary, guard bytes on both sides: where the
/// streaming stores' alignment is known.
class AlignedPlacement {
 public:
  AlignedPlacement(std::size_t size, std::size_t offset, unsigned char fill)
      : total_(kGuard + offset + size + kGuard),
        storage_(static_cast<unsigned char*>(::operator new[](total_, std::align_val_t{64}))),
        begin_(kGuard + offset),
        size_(size) {
    std::memset(storage_.get(), kGuardByte, total_);
    std::memset(data(), fill, size);
  }
  unsigned char* data() { return storage_.get() + begin_; }
  bool guards_intact() const {
    for (std::size_t i = 0; i < total_; ++i)
      if ((i < begin_ || i >= begin_ + size_) && storage_[i] != kGuardByte) return false;
    return true;
  }

 private:
  struct AlignedDelete {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::size_t total_;
  std::unique_ptr<unsigned char[], AlignedDelete> storage_;
  std::size_t begin_;
  std::size_t size_;
};

/// inputs[0] op inputs[1] op ... element by element, each step rounded to the dtype.
std::vector<unsigned char> chained_reference(ReduceOp op, DType dtype, std::size_t count,
                                             const std::vector<std::vector<unsigned char>>& in) {
  const std::size_t size = dtype_size(dtype);
  std::vector<unsigned char> want(in[0]);
  for (std::size_t r = 1; r < in.size(); ++r)
    for (std::size_t i = 0; i < count; ++i)
      reference_element(op, dtype, want.data() + i * size, in[r].data() + i * size,
                        want.data() + i * size);
  return want;
}

std::string first_mismatch(DType dtype, const unsigned char* got,
                           const std::vector<unsigned char>& want) {
  const std::size_t size = dtype_size(dtype);
  for (std::size_t i = 0; i * size < want.size(); ++i)
    if (!same_element(dtype, got + i * size, want.data() + i * size))
      return "element " + std::to_string(i) + ": got " + hex_element(dtype, got + i * size) +
             " want " + hex_element(dtype, want.data() + i * size);
  return {};
}

enum class Layout { Aligned, MisalignedAlike, MixedAlignment, InPlaceFirst, InPlaceLast };

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::Aligned: return "output 64-byte aligned";
    case Layout::MisalignedAlike: return "outputs one element past alignment alike";
    case Layout::MixedAlignment: return "output j one element past alignment times j";
    case Layout::InPlaceFirst: return "output 0 is input 0, all one element past alignment";
    case Layout::InPlaceLast: return "output 0 is the last input, all one element past alignment";
  }
  return "?";
}

void run_fold(ReduceOp op, DType dtype, std::size_t count, std::size_t n_outputs, Layout layout,
              Stores stores, const std::vector<std::vector<unsigned char>>& in,
              const std::vector<unsigned char>& want) {
  const std::size_t size = dtype_size(dtype);
  const std::size_t bytes = count * size;
  std::vector<AlignedPlacement> input_copies;
  for (const auto& data : in) {
    // Inputs sit one element past alignment: the kernel may not assume aligned loads.
    input_copies.emplace_back(bytes, size, 0);
    if (bytes != 0) std::memcpy(input_copies.back().data(), data.data(), bytes);
  }
  std::vector<AlignedPlacement> output_places;
  // Streaming stores need every output aligned alike: Aligned streams from the start, and
  // MisalignedAlike and the in-place layouts (inputs sit one element past alignment too) after
  // a head that brings them to a 64-byte boundary; MixedAlignment cannot stream.
  for (std::size_t j = 0; j < n_outputs; ++j) {
    const std::size_t offset = layout == Layout::Aligned          ? 0
                               : layout == Layout::MixedAlignment ? j * size
                                                                  : size;
    output_places.emplace_back(bytes, offset, 0x5a);
  }
  std::vector<const void*> inputs;
  for (auto& placed : input_copies) inputs.push_back(placed.data());
  std::vector<void*> outputs;
  for (auto& placed : output_places) outputs.push_back(placed.data());
  if (layout == Layout::InPlaceFirst) outputs[0] = input_copies.front().data();
  if (layout == Layout::InPlaceLast) outputs[0] = input_copies.back().data();

  fold_to_all(op, dtype, outputs.data(), outputs.size(), inputs.data(), inputs.size(), count,
              stores);

  INFO("isa=" << active_isa() << " op=" << reduce_op_name(op) << " dtype=" << dtype_name(dtype)
              << " count=" << count << " inputs=" << in.size() << " outputs=" << n_outputs
              << " layout=" << layout_name(layout)
              << " stores=" << (stores == Stores::Streaming ? "streaming" : "cached"));
  for (std::size_t j = 0; j < n_outputs; ++j) {
    const std::string mismatch =
        first_mismatch(dtype, static_cast<unsigned char*>(outputs[j]), want);
    INFO("output " << j << ": " << mismatch);
    CHECK(mismatch.empty());
    CHECK(output_places[j].guards_intact());
  }
  for (std::size_t r = 0; r < in.size(); ++r) {
    CHECK(input_copies[r].guards_intact());
    const bool written = (layout == Layout::InPlaceFirst && r == 0) ||
                         (layout == Layout::InPlaceLast && r + 1 == in.size());
    if (!written && bytes != 0)
      CHECK(std::memcmp(input_copies[r].data(), in[r].data(), bytes) == 0);
  }
}

TEST_CASE("fold_to_all matches the chained reference on every op, dtype and ISA", "[reduce]") {
  IsaRestorer restore;
  std::mt19937_64 rng(20261129);
  // Around one block (up to 64 bytes) and the 64-byte head that streaming stores align to,
  // and one run through many blocks.
  const std::size_t kCounts[] = {0, 1, 7, 63, 64, 65, 129, 1031};
  const std::size_t kInputs[] = {2, 3, 5};
  const Layout kLayouts[] = {Layout::Aligned, Layout::MisalignedAlike, Layout::MixedAlignment,
                             Layout::InPlaceFirst, Layout::InPlaceLast};
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (!reduce_op_supports(op, dtype)) continue;
      for (std::size_t count : kCounts) {
        for (std::size_t n_inputs : kInputs) {
          std::vector<std::vector<unsigned char>> in;
          for (std::size_t r = 0; r < n_inputs; ++r)
            in.push_back(random_elements(dtype, count, rng));
          const auto want = chained_reference(op, dtype, count, in);
          for (Isa isa : available_isas()) {
            force_isa(isa);
            for (Stores stores : {Stores::Cached, Stores::Streaming}) {
              for (Layout layout : kLayouts) {
                const std::size_t n_outputs = layout == Layout::Aligned ? 1 : 3;
                run_fold(op, dtype, count, n_outputs, layout, stores, in, want);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("fold_to_all writes the same bits as reduce_to followed by reduce_into", "[reduce]") {
  // The collectives mix both forms (the mapped allreduce folds in one pass, the others in steps),
  // and every rank must get the same bits whichever ran. bf16 sums of five inputs round at every
  // step, so a kernel that kept the running sum in float would differ here.
  IsaRestorer restore;
  std::mt19937_64 rng(7);
  const std::size_t count = 4099;
  for (DType dtype : {DType::BFloat16, DType::Float16, DType::Float8E4M3, DType::Float32}) {
    std::vector<std::vector<unsigned char>> in;
    for (int r = 0; r < 5; ++r) in.push_back(random_elements(dtype, count, rng));
    for (Isa isa : available_isas()) {
      force_isa(isa);
      std::vector<unsigned char> stepwise(in[0].size());
      reduce_to(ReduceOp::Sum, dtype, stepwise.data(), in[0].data(), in[1].data(), count);
      for (int r = 2; r < 5; ++r)
        reduce_into(ReduceOp::Sum, dtype, stepwise.data(), in[r].data(), count);
      std::vector<unsigned char> fused(in[0].size(), 0);
      const void* inputs[5] = {in[0].data(), in[1].data(), in[2].data(), in[3].data(),
                               in[4].data()};
      void* outputs[1] = {fused.data()};
      fold_to_all(ReduceOp::Sum, dtype, outputs, 1, inputs, 5, count, Stores::Streaming);
      INFO("isa=" << active_isa() << " dtype=" << dtype_name(dtype) << " "
                  << first_mismatch(dtype, fused.data(), stepwise));
      CHECK(first_mismatch(dtype, fused.data(), stepwise).empty());
    }
  }
}

TEST_CASE("fold_to_all streams into many outputs, each whole", "[reduce]") {
  // A mapped allreduce on n ranks stores every block into n outputs; streamed a line of one
  // output at a time (vector_kernels.hpp, fold_blocks). 17 outputs, more than a core's
  // write-combining buffers, aligned and one element past alignment alike, over counts that
  // end mid-line and mid-block.
  IsaRestorer restore;
  std::mt19937_64 rng(17);
  // f16: 32-byte blocks on AVX-512 too (F16C widens half a vector).
  for (DType dtype :
       {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64, DType::Int8}) {
    for (std::size_t count : {std::size_t{1031}, std::size_t{4096} + 3}) {
      std::vector<std::vector<unsigned char>> in;
      for (int r = 0; r < 3; ++r) in.push_back(random_elements(dtype, count, rng));
      const auto want = chained_reference(ReduceOp::Sum, dtype, count, in);
      for (Isa isa : available_isas()) {
        force_isa(isa);
        for (Layout layout : {Layout::Aligned, Layout::MisalignedAlike})
          run_fold(ReduceOp::Sum, dtype, count, 17, layout, Stores::Streaming, in, want);
      }
    }
  }
}

TEST_CASE("fold_to_all refuses bad arguments before writing any output", "[reduce]") {
  std::vector<float> a(16, 1.0f), b(16, 2.0f), out(16, -7.0f);
  const void* two[2] = {a.data(), b.data()};
  const void* one_null[2] = {a.data(), nullptr};
  void* outputs[1] = {out.data()};
  void* null_output[2] = {out.data(), nullptr};
  auto refused = [&](auto&& call, const std::string& words) {
    try {
      call();
      FAIL("not refused: " << words);
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(std::string(e.what()).find(words) != std::string::npos);
    }
    for (float v : out) CHECK(v == -7.0f);
  };
  refused(
      [&] { fold_to_all(ReduceOp::Sum, DType::Float32, outputs, 1, two, 1, 16, Stores::Cached); },
      "at least 2 inputs and 1 output, got 1 and 1");
  refused(
      [&] { fold_to_all(ReduceOp::Sum, DType::Float32, outputs, 0, two, 2, 16, Stores::Cached); },
      "got 2 and 0");
  refused(
      [&] {
        fold_to_all(ReduceOp::Sum, DType::Float32, outputs, 1, one_null, 2, 16, Stores::Cached);
      },
      "input 1 is null");
  refused(
      [&] {
        fold_to_all(ReduceOp::Sum, DType::Float32, null_output, 2, two, 2, 16, Stores::Cached);
      },
      "output 1 is null");
  refused(
      [&] { fold_to_all(ReduceOp::BXor, DType::Float32, outputs, 1, two, 2, 16, Stores::Cached); },
      "not defined on dtype float ");
}

}  // namespace
}  // namespace cohort::reduce::testing
