#pragma once

// Reading another process's memory (process_vm_readv): the single copy that the shared arena's
// single-copy algorithms and the fastboxes' large messages use between ranks of one host. The
// kernel allows it only where ptrace would be allowed (same user, no Yama or seccomp rule against
// it), so users of it probe first: a peer publishes a random value and its address, and the
// reader checks that it reads that value through the peer's pid (which also catches a pid that
// names another process, as across pid namespaces).

#include <cstddef>
#include <cstdint>

#include <sys/types.h>

namespace cohort::transport {

/// One process_vm_readv of `bytes` at `from` in process `pid` into `into`: what it returns (the
/// bytes read, which may be fewer than asked, or -1 with errno set).
ssize_t read_process_once(pid_t pid, void* into, const void* from, std::size_t bytes) noexcept;

/// Reads all `bytes` at `from` in process `pid` into `into`, going on where the kernel stopped
/// short (it stops at a page it cannot pin). 0 when done, else the errno that stopped it (EFAULT
/// for a read that made no progress; ESRCH when the process is gone). Never throws.
int read_process_memory(pid_t pid, void* into, const void* from, std::size_t bytes) noexcept;

/// read_process_memory, then the 8-byte word at `seal_at` in the same process, which must hold
/// `seal` (see send_seal.hpp): 0 when both reads succeeded and the word held it, ECANCELED when
/// it held another value or could not be read (the sender withdrew the buffer, perhaps during the
/// copy, and the bytes read may be the caller's later ones; or `pid` is no longer the sender's),
/// else the errno that stopped a read. The word is read after the last byte. `tail` holds the
/// message's last min(bytes, 8) bytes, as the sender announced them: where loads stay in order
/// (x86), one system call reads all but those bytes and then the seal into the one buffer `into`,
/// and `tail` is put back over the seal (a second local iovec would take the kernel's slower
/// general copy path). Never throws.
int read_sealed_process_memory(pid_t pid, void* into, const void* from, std::size_t bytes,
                               std::uint64_t seal_at, std::uint64_t seal,
                               std::uint64_t tail) noexcept;

/// Reads the probe process `pid` published: 0 when it holds `expected` at `at`; the errno of a
/// failed read; -1 when the read found another value (the pid names another process).
int check_probe(pid_t pid, std::uint64_t at, std::uint64_t expected) noexcept;

/// A random value, never 0, to publish as a probe (getrandom, else the clock and the pid).
std::uint64_t random_probe() noexcept;

}  // namespace cohort::transport
