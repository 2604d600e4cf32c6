#include "support/cross_process_reads.hpp"

#include "support/forked_child.hpp"
#include "support/sync_pipe.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <vector>

namespace cohort::test {

bool reads_only(pid_t pid, std::uint64_t address, std::size_t bytes, unsigned char pattern) {
  std::vector<unsigned char> seen(bytes, static_cast<unsigned char>(~pattern));
  iovec local{seen.data(), bytes};
  iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), bytes};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(bytes)) return false;
  return std::all_of(seen.begin(), seen.end(), [&](unsigned char c) { return c == pattern; });
}

bool siblings_can_read_each_other() {
  static const bool answer = [] {
    // After fork the marker sits at the same address in both children.
    static std::array<unsigned char, 64> marker;
    constexpr unsigned char kPattern = 0xc5;
    marker.fill(kPattern);
    SyncPipe done;
    ForkedChild holder([&] {
      done.take(std::chrono::seconds(60));  // stays alive until the reader is done
      return 0;
    });
    ForkedChild reader([&] {
      return reads_only(holder.pid(), reinterpret_cast<std::uintptr_t>(marker.data()),
                        marker.size(), kPattern)
                 ? 0
                 : 1;
    });
    const bool readable = reader.join() == 0;
    done.post();
    holder.join();
    return readable;
  }();
  return answer;
}

}  // namespace cohort::test
