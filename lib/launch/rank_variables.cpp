#include "launch/rank_variables.hpp"

#include "core/system_error.hpp"
#include "launch/pipes.hpp"

#include <cerrno>
#include <cstdint>
#include <unordered_map>

#include <fcntl.h>
#include <unistd.h>

namespace cohort::launcher {

EnvironmentVariables rank_variables(const RankPlacement& p) {
  const std::string port = std::to_string(p.store_port);
  EnvironmentVariables variables{
      {"COHORT_RANK", std::to_string(p.rank)},
      {"COHORT_WORLD_SIZE", std::to_string(p.world_size)},
      {"COHORT_LOCAL_RANK", std::to_string(p.local_rank)},
      {"COHORT_LOCAL_WORLD_SIZE", std::to_string(p.local_world_size)},
      {"COHORT_NODE_RANK", std::to_string(p.node_rank)},
      {"COHORT_NNODES", std::to_string(p.num_nodes)},
      {"COHORT_STORE_ADDR", p.store_addr},
      {"COHORT_STORE_PORT", port},
      {"COHORT_TOKEN", p.token},
      {"RANK", std::to_string(p.rank)},
      {"WORLD_SIZE", std::to_string(p.world_size)},
      {"LOCAL_RANK", std::to_string(p.local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(p.local_world_size)},
      {"GROUP_RANK", std::to_string(p.node_rank)},
  };
  if (p.master_port != 0) {
    variables.emplace_back("MASTER_ADDR", p.store_addr);
    variables.emplace_back("MASTER_PORT", std::to_string(p.master_port));
  }
  return variables;
}

std::vector<std::string> merge_environment(const std::vector<std::string>& base,
                                           const EnvironmentVariables& overrides) {
  std::unordered_map<std::string, std::size_t> position;
  std::vector<std::string> merged;
  merged.reserve(base.size() + overrides.size());
  auto put = [&](const std::string& key, std::string entry) {
    if (auto it = position.find(key); it != position.end()) {
      merged[it->second] = std::move(entry);
    } else {
      position.emplace(key, merged.size());
      merged.push_back(std::move(entry));
    }
  };
  for (const std::string& entry : base) put(entry.substr(0, entry.find('=')), entry);
  for (const auto& [key, value] : overrides) put(key, key + "=" + value);
  return merged;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> result;
  for (char** entry = environ; entry && *entry; ++entry) result.emplace_back(*entry);
  return result;
}

std::string random_token() {
  UniqueFd random(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!random) throw system_error("open(/dev/urandom)", errno);
  std::uint8_t bytes[16];
  std::size_t have = 0;
  while (have < sizeof bytes) {
    const ssize_t n = ::read(random.get(), bytes + have, sizeof bytes - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw system_error("read(/dev/urandom)", n < 0 ? errno : EIO);
    have += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (std::uint8_t b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

}  // namespace cohort::launcher
