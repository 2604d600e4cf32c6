#include "support/cross_process_reads.hpp"

#include "support/forked_child.hpp"
#include "support/sync_pipe.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <cstdint>

namespace cohort::test {

bool siblings_can_read_each_other() {
  // After fork the value sits at the same address in both children.
  static volatile std::uint64_t marker = 0;
  marker = 0x5106'1e00'c0b1'e5c0ULL ^ static_cast<std::uint64_t>(getpid());
  SyncPipe done;
  ForkedChild holder([&] {
    done.take(std::chrono::seconds(60));  // stays alive until the reader is done
    return 0;
  });
  ForkedChild reader([&] {
    std::uint64_t seen = 0;
    iovec local{&seen, sizeof seen};
    iovec remote{const_cast<std::uint64_t*>(&marker), sizeof seen};
    const bool read = process_vm_readv(holder.pid(), &local, 1, &remote, 1, 0) ==
                      static_cast<ssize_t>(sizeof seen);
    return read && seen == marker ? 0 : 1;
  });
  const bool readable = reader.join() == 0;
  done.post();
  holder.join();
  return readable;
}

}  // namespace cohort::test
