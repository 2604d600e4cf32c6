#pragma once

// cohort's own collectives behind the Implementation interface, through the public API only.

#include "implementation.hpp"

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
  std::shared_ptr<Communicator> comm_;
};

}  // namespace cohort::bench
