#pragma once

// cohort's own collectives behind the Implementation interface, through the public API only.

#include "implementation.hpp"

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>

#include <memory>

namespace cohort::bench {

class CohortImplementation final : public Implementation {
 public:
  explicit CohortImplementation(std::shared_ptr<Communicator> comm);

  std::string_view name() const noexcept override { return "cohort"; }
  std::optional<std::string> unsupported(const OpCall& call) const override;
  void run(const OpCall& call) override;

 private:
  /// A view of `data`, rebuilt only when the call's buffers change: an engine keeps its tensors'
  /// Buffers across steps, so the timed loop should not measure building them either.
  const Buffer& view_of(Buffer& cached, void* data, std::size_t count, DType dtype, Device device);

  std::shared_ptr<Communicator> comm_;
  Buffer in_, out_;
};

}  // namespace cohort::bench
