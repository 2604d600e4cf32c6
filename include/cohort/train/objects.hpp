#pragma once

/// Moving small objects between ranks: a config, a tokenizer's vocabulary, a list of file names,
/// a metric computed on one rank. cohort moves bytes; the engine serialises (pickle, JSON,
/// protobuf: cohort never interprets them). Plain values (an int64, a struct of doubles) travel as
/// their exact bytes.
///
/// The steps this header serves:
///
///     broadcast_bytes(*comm, config_json, /*root=*/0);           // every rank parses one config
///     auto files = allgather_bytes_list(*comm, my_file_names);    // every rank sees them all
///     auto tokens = compute_and_broadcast(*comm, [&] { return count_tokens(); });  // root only
///     auto worst = reduce_and_broadcast(                          // max of the ranks' losses
///         *comm, [&] { return local_loss(); },
///         [](const std::vector<double>& losses) { return std::ranges::max(losses); });
///
/// Common rules. Every function is collective over `comm`: all ranks call it with the same root.
/// A root outside [0, size) or a timeout that is not positive or exceeds kMaxTimeout (one year)
/// throws InvalidArgument on each rank before
/// anything moves. `timeout` is each underlying collective's deadline (unset: the communicator's).
/// A world of one communicates nothing and returns the same results. Where caller code runs (the
/// functions taking callbacks), an exception on one rank reaches the other ranks as RemoteError
/// naming that rank and the exception's message, never as a hang: the failing rank rethrows its
/// own exception. Byte order is native: the ranks of a job share one architecture.

#include <cohort/buffer.hpp>
#include <cohort/communicator.hpp>

#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cohort::train {

/// One serialised object: the bytes the engine's serialiser produced.
using Blob = std::vector<std::byte>;

/// torch's broadcast of one object: the root's `blob` replaces `blob` on every other rank (resized
/// to the root's length). Cost: a broadcast of a status byte and the 8-byte length, then one of
/// the bytes (skipped when empty).
void broadcast_bytes(Communicator& comm, Blob& blob, int root = 0,
                     std::optional<std::chrono::milliseconds> timeout = {});

/// broadcast_bytes whose root makes its bytes in the call: `produce(blob)` runs on the root only
/// (a binding converting the root's object, say). If it throws, the root rethrows its exception
/// and every other rank throws RemoteError "broadcast_bytes: the root's data threw on root <r>:
/// <message>", instead of waiting out the timeout for a length that never comes. The same
/// messages as broadcast_bytes, so the two pair up across ranks.
void broadcast_bytes_from(Communicator& comm, Blob& blob, const std::function<void(Blob&)>& produce,
                          int root = 0, std::optional<std::chrono::milliseconds> timeout = {});

/// torch's broadcast_object_list: the root's `items` replace `items` on every other rank. torch
/// requires the receivers' list to have the root's length already; cohort resizes it to the
/// root's count instead (a deliberate relaxation: receivers rarely know it). Cost: broadcasts of
/// the count, of the sizes (8 bytes per item), and of the items' bytes concatenated.
void broadcast_bytes_list(Communicator& comm, std::vector<Blob>& items, int root = 0,
                          std::optional<std::chrono::milliseconds> timeout = {});

/// torch's all_gather_object: every rank's `mine`, in rank order, on every rank (size() entries).
/// Cost: an allgather of 8 bytes per rank (the sizes), then an allgatherv of the bytes.
std::vector<Blob> allgather_bytes(Communicator& comm, std::span<const std::byte> mine,
                                  std::optional<std::chrono::milliseconds> timeout = {});

/// allgather_bytes whose ranks make their bytes in the call: `produce(blob)` runs on every rank
/// (a binding converting each rank's object, say). If it throws on some ranks, they rethrow their
/// exceptions and every other rank throws InvalidArgument naming them ("ranks 2 could not make
/// their bytes"), instead of waiting out the timeout. The same messages as allgather_bytes (a
/// size word no real size reaches marks a failure), so the two pair up across ranks.
std::vector<Blob> allgather_bytes_from(Communicator& comm,
                                       const std::function<void(Blob&)>& produce,
                                       std::optional<std::chrono::milliseconds> timeout = {});

/// Accelerate's gather_object, which despite its name is an all-gather and flattens one level:
/// every rank's items concatenated in rank order, on every rank. r0 ["a","b"], r1 [], r2 ["c"]
/// gives ["a","b","c"] on all three. Cost: an allgather of the counts, an allgatherv of the sizes
/// and one of the bytes (each skipped when it would move nothing).
std::vector<Blob> allgather_bytes_list(Communicator& comm, const std::vector<Blob>& mine,
                                       std::optional<std::chrono::milliseconds> timeout = {});

/// torch's gather_object: on the root, every rank's `mine` in rank order; on the other ranks an
/// empty vector. Cost: an allgather of 8 bytes per rank (every rank passes the layout to gatherv),
/// then a gatherv of the bytes.
std::vector<Blob> gather_bytes(Communicator& comm, std::span<const std::byte> mine, int root = 0,
                               std::optional<std::chrono::milliseconds> timeout = {});

/// gather_bytes whose ranks make their bytes in the call, failing every rank as
/// allgather_bytes_from does.
std::vector<Blob> gather_bytes_from(Communicator& comm, const std::function<void(Blob&)>& produce,
                                    int root = 0,
                                    std::optional<std::chrono::milliseconds> timeout = {});

/// The root's buffer on every rank, receivers learning its dtype and shape from the root (torch
/// needs a receiving tensor of the right shape already). On the root, returns `in` itself (the
/// same memory); elsewhere a new contiguous host allocation, `in` being ignored (pass Buffer{}).
/// The root's buffer must be contiguous (else InvalidArgument) and in host-accessible memory
/// (else Unsupported: receivers allocate on the host); that error is thrown on every rank, decided
/// by the root. Cost: broadcasts of the header's length (with a status byte) and of the header
/// (dtype, shape), then one of the data.
Buffer broadcast_buffer(Communicator& comm, const Buffer& in, int root = 0,
                        std::optional<std::chrono::milliseconds> timeout = {});

namespace detail {

template <class T>
constexpr void check_plain_value() {
  static_assert(std::is_trivially_copyable_v<T>,
                "cohort::train object collectives move T as its bytes: T must be trivially "
                "copyable (serialise anything else to a Blob)");
  static_assert(!std::is_pointer_v<T>, "a pointer means nothing in another process");
}

template <class T>
std::array<std::byte, sizeof(T)> bytes_of(const T& value) {
  return std::bit_cast<std::array<std::byte, sizeof(T)>>(value);
}

/// `count` values of T read from `bytes` (bit_cast: T needs no default constructor).
template <class T>
std::vector<T> values_of(std::span<const std::byte> bytes, std::size_t count) {
  std::vector<T> values;
  values.reserve(count);
  std::array<std::byte, sizeof(T)> raw;
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(raw.data(), bytes.data() + i * sizeof(T), sizeof(T));
    values.push_back(std::bit_cast<T>(raw));
  }
  return values;
}

/// Checks root and timeout (InvalidArgument naming `op` and the value) and returns the options
/// for the collectives.
CollectiveOptions checked_options(std::string_view op, const Communicator& comm, int root,
                                  std::optional<std::chrono::milliseconds> timeout);

/// The transport of compute_and_broadcast: on the root, `produce` fills `out`; a status byte
/// travels in front of the value, and on failure the message follows, so every other rank throws
/// RemoteError "<what> threw on root <root>: <message>" and the root rethrows its own exception.
void compute_and_broadcast_bytes(Communicator& comm, std::span<std::byte> out,
                                 const std::function<void(std::span<std::byte>)>& produce, int root,
                                 std::string_view what, const CollectiveOptions& options);

/// Runs `fn` on every rank, then one status exchange: returns when it succeeded everywhere;
/// otherwise a failing rank rethrows its exception and the others throw RemoteError
/// "<what> threw on rank <r>: <message>".
void run_on_every_rank(Communicator& comm, const std::function<void()>& fn, std::string_view what,
                       const CollectiveOptions& options);

/// gather of mine.size() bytes per rank into `out` (on the root: size() * mine.size() bytes).
void gather_fixed(Communicator& comm, std::span<const std::byte> mine, std::span<std::byte> out,
                  int root, const CollectiveOptions& options);

template <class T, class F>
T compute_and_broadcast_as(Communicator& comm, F& fn, int root, std::string_view what,
                           const CollectiveOptions& options) {
  std::array<std::byte, sizeof(T)> raw{};
  compute_and_broadcast_bytes(
      comm, raw,
      [&fn](std::span<std::byte> out) {
        const std::array<std::byte, sizeof(T)> value = bytes_of<T>(std::invoke(fn));
        std::memcpy(out.data(), value.data(), sizeof(T));
      },
      root, what, options);
  return std::bit_cast<T>(raw);
}

}  // namespace detail

/// axolotl's compute_and_broadcast: fn runs on the root only, and its result (a trivially
/// copyable T) is returned on every rank. axolotl sends the value through a float32 tensor, so an
/// int64 16777217 arrives as 16777216; cohort sends T's exact bytes. If fn throws on the root, the
/// root rethrows it and every other rank throws RemoteError naming the root and the message.
/// Cost: one broadcast of 1 + sizeof(T) bytes (on failure, the message follows as a
/// broadcast_bytes: two more).
template <class F>
std::remove_cvref_t<std::invoke_result_t<F&>> compute_and_broadcast(
    Communicator& comm, F&& fn, int root = 0,
    std::optional<std::chrono::milliseconds> timeout = {}) {
  using T = std::remove_cvref_t<std::invoke_result_t<F&>>;
  detail::check_plain_value<T>();
  const CollectiveOptions options =
      detail::checked_options("compute_and_broadcast", comm, root, timeout);
  return detail::compute_and_broadcast_as<T>(comm, fn, root, "compute_and_broadcast: fn", options);
}

/// axolotl's gather_from_all_ranks over a value rather than a callback: on the root, every rank's
/// `value` in rank order; on the other ranks an empty vector. Exact bytes (axolotl: float32).
/// Cost: one gather of sizeof(T) bytes per rank.
template <class T>
std::vector<T> gather_from_all(Communicator& comm, const T& value, int root = 0,
                               std::optional<std::chrono::milliseconds> timeout = {}) {
  detail::check_plain_value<T>();
  const CollectiveOptions options = detail::checked_options("gather_from_all", comm, root, timeout);
  const bool is_root = comm.rank() == root;
  const std::array<std::byte, sizeof(T)> mine = detail::bytes_of(value);
  std::vector<std::byte> all(is_root ? sizeof(T) * static_cast<std::size_t>(comm.size()) : 0);
  detail::gather_fixed(comm, mine, all, root, options);
  return is_root ? detail::values_of<T>(all, static_cast<std::size_t>(comm.size()))
                 : std::vector<T>{};
}

/// axolotl's reduce_and_broadcast: fn1() runs on every rank, the values are gathered on the root
/// (in rank order), fn2(values) runs on the root only, and its result is returned on every rank.
/// T = fn1's result, U = fn2's; both trivially copyable and moved as exact bytes. fn1 = r*r + 1
/// with fn2 = max on 3 ranks gives 5 everywhere. A throwing fn1 on any rank, or fn2 on the root,
/// is rethrown there and is RemoteError naming the rank and message everywhere else; fn2 does not
/// run when fn1 failed anywhere. Cost: an allreduce of 4 bytes (fn1's status), a gather of
/// sizeof(T) bytes per rank, a broadcast of 1 + sizeof(U) bytes.
template <class F1, class F2>
auto reduce_and_broadcast(Communicator& comm, F1&& fn1, F2&& fn2, int root = 0,
                          std::optional<std::chrono::milliseconds> timeout = {}) {
  using T = std::remove_cvref_t<std::invoke_result_t<F1&>>;
  using U = std::remove_cvref_t<std::invoke_result_t<F2&, const std::vector<T>&>>;
  detail::check_plain_value<T>();
  detail::check_plain_value<U>();
  const CollectiveOptions options =
      detail::checked_options("reduce_and_broadcast", comm, root, timeout);

  std::array<std::byte, sizeof(T)> mine{};
  detail::run_on_every_rank(
      comm, [&] { mine = detail::bytes_of<T>(std::invoke(fn1)); }, "reduce_and_broadcast: fn1",
      options);
  const auto size = static_cast<std::size_t>(comm.size());
  std::vector<std::byte> all(comm.rank() == root ? sizeof(T) * size : 0);
  detail::gather_fixed(comm, mine, all, root, options);
  auto reduce = [&] { return std::invoke(fn2, detail::values_of<T>(all, size)); };
  return detail::compute_and_broadcast_as<U>(comm, reduce, root, "reduce_and_broadcast: fn2",
                                             options);
}

}  // namespace cohort::train
