// Byte and value collectives (include/cohort/train/objects.hpp), over the public Communicator.
//
// How they work: a receiver cannot post a receive of unknown length, so every variable-sized
// transfer sends its sizes first (a broadcast, or an allgather when every rank contributes) and
// then the bytes in one collective: broadcast for one root, allgatherv / gatherv when every rank
// contributes, with each rank's sizes giving the layout. Zero-length transfers are skipped on
// every rank alike, since the sizes that decide it are known everywhere.
//
// Where caller code runs on the root (compute_and_broadcast, reduce_and_broadcast's fn2), the
// value travels in a frame of [status byte | value]: one broadcast whether fn succeeded or threw,
// so a throwing root never leaves the other ranks waiting for a value that will not come. Only on
// failure does the message follow (as a broadcast_bytes). broadcast_bytes itself sends its length
// in such a frame, so a root that cannot make its bytes (broadcast_bytes_from) fails every rank;
// the *_bytes_from gathers mark a rank that cannot with a size no real one reaches.

#include <cohort/error.hpp>
#include <cohort/train/objects.hpp>

#include "train/byte_codec.hpp"
#include "train/failure_exchange.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

namespace cohort::train {
namespace {

Buffer bytes_view(std::span<std::byte> bytes) {
  return Buffer::view(bytes.data(), bytes.size(), DType::UInt8);
}

Buffer bytes_view(std::span<const std::byte> bytes) {
  return Buffer::view(bytes.data(), bytes.size(), DType::UInt8);
}

Buffer words_view(std::span<std::uint64_t> words) {
  return Buffer::view(words.data(), words.size(), DType::UInt64);
}

std::vector<std::size_t> to_counts(const std::vector<std::uint64_t>& words) {
  return std::vector<std::size_t>(words.begin(), words.end());
}

std::size_t sum(const std::vector<std::size_t>& counts) {
  std::size_t total = 0;
  for (std::size_t n : counts) total += n;
  return total;
}

// Cuts `bytes` into consecutive blobs of the given sizes.
std::vector<Blob> split(std::span<const std::byte> bytes, const std::vector<std::size_t>& sizes) {
  std::vector<Blob> blobs;
  blobs.reserve(sizes.size());
  std::size_t offset = 0;
  for (std::size_t n : sizes) {
    blobs.emplace_back(bytes.begin() + static_cast<std::ptrdiff_t>(offset),
                       bytes.begin() + static_cast<std::ptrdiff_t>(offset + n));
    offset += n;
  }
  return blobs;
}

// Every rank's 8-byte word, in rank order.
std::vector<std::uint64_t> allgather_words(Communicator& comm, std::uint64_t mine,
                                           const CollectiveOptions& options) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(words_view({&mine, 1}), words_view(all), options);
  return all;
}

// A rank's size word when it could not make its bytes: no real size reaches it.
constexpr std::uint64_t kNoBytes = ~std::uint64_t{0};

// Every rank's byte count, on every rank. `error`: this rank could not make its bytes; then it
// rethrows that, and every other rank throws naming the ranks that failed.
std::vector<std::size_t> agreed_lengths(Communicator& comm, std::size_t mine,
                                        const std::exception_ptr& error, std::string_view op,
                                        const CollectiveOptions& options) {
  const std::vector<std::uint64_t> words =
      allgather_words(comm, error ? kNoBytes : std::uint64_t{mine}, options);
  if (error) std::rethrow_exception(error);
  std::vector<int> failed;
  for (std::size_t r = 0; r < words.size(); ++r)
    if (words[r] == kNoBytes) failed.push_back(static_cast<int>(r));
  if (!failed.empty())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: ranks {} could not make their bytes (their errors say why)", op,
                            fmt::join(failed, ", ")));
  return to_counts(words);
}

// What `produce` made on this rank, or the exception it threw.
std::exception_ptr made_by(const std::function<void(Blob&)>& produce, Blob& blob) {
  try {
    produce(blob);
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

// ---- broadcast_buffer's header: the root's verdict on its buffer, then its dtype and shape.

enum class HeaderStatus : std::uint8_t { Ready = 0, Refused = 1 };

constexpr const char* kBroadcastBuffer = "broadcast_buffer";

// Why the root's buffer cannot be broadcast, as the Error every rank will throw; nullopt if it
// can.
std::optional<Error> refusal(const Buffer& in, int root) {
  if (!in.device().host_accessible()) {
    return Error(ErrorCode::Unsupported,
                 fmt::format("{}: root {}'s buffer is on device {}; only host memory is supported "
                             "(receivers allocate on the host)",
                             kBroadcastBuffer, root, in.device().to_string()));
  }
  if (!in.is_contiguous()) {
    return Error(ErrorCode::InvalidArgument,
                 fmt::format("{}: root {}'s buffer is not contiguous; pass a contiguous buffer",
                             kBroadcastBuffer, root));
  }
  return std::nullopt;
}

Blob encode_header(const Buffer& in, const std::optional<Error>& refused) {
  ByteWriter w;
  if (refused) {
    w.u8(static_cast<std::uint8_t>(HeaderStatus::Refused));
    w.u8(static_cast<std::uint8_t>(refused->code()));
    w.text(refused->message());
    return w.take();
  }
  w.u8(static_cast<std::uint8_t>(HeaderStatus::Ready));
  w.u8(static_cast<std::uint8_t>(in.dtype()));
  w.u64(in.shape().size());
  for (std::int64_t extent : in.shape()) w.u64(static_cast<std::uint64_t>(extent));
  return w.take();
}

// A receiver's view of the header: a new buffer of the root's dtype and shape, or the root's
// refusal thrown here too.
Buffer allocate_from_header(std::span<const std::byte> header) {
  ByteReader r(header, std::string(kBroadcastBuffer) + ": the root's header");
  const std::uint8_t status = r.u8();
  if (status == static_cast<std::uint8_t>(HeaderStatus::Refused)) {
    const auto code = static_cast<ErrorCode>(r.u8());
    throw Error(code, r.text());
  }
  if (status != static_cast<std::uint8_t>(HeaderStatus::Ready)) {
    throw Error(ErrorCode::Internal,
                fmt::format("{}: the root's header has status {}", kBroadcastBuffer, status));
  }
  const auto dtype = static_cast<DType>(r.u8());
  // No reserve from the count: every extent consumes 8 bytes or throws.
  const std::uint64_t ndim = r.u64();
  std::vector<std::int64_t> shape;
  for (std::uint64_t i = 0; i < ndim; ++i) shape.push_back(static_cast<std::int64_t>(r.u64()));
  if (!r.done()) {
    throw Error(ErrorCode::Internal,
                fmt::format("{}: the root's header has trailing bytes", kBroadcastBuffer));
  }
  return Buffer::allocate(std::move(shape), dtype);
}

// ---- compute_and_broadcast's frame.

enum class ValueStatus : std::uint8_t { Ready = 0, Threw = 1 };

}  // namespace

namespace detail {

CollectiveOptions checked_options(std::string_view op, const Communicator& comm, int root,
                                  std::optional<std::chrono::milliseconds> timeout) {
  if (root < 0 || root >= comm.size()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: root {} is out of range for a communicator of size {}", op, root,
                            comm.size()));
  }
  return collective_options(op, timeout);
}

void compute_and_broadcast_bytes(Communicator& comm, std::span<std::byte> out,
                                 const std::function<void(std::span<std::byte>)>& produce, int root,
                                 std::string_view what, const CollectiveOptions& options) {
  if (comm.size() == 1) {
    produce(out);
    return;
  }
  const bool is_root = comm.rank() == root;

  // 1. The root runs fn; its status and value travel together.
  Blob frame(1 + out.size());
  std::exception_ptr error;
  if (is_root) {
    try {
      produce(std::span<std::byte>(frame).subspan(1));
      frame[0] = std::byte{static_cast<std::uint8_t>(ValueStatus::Ready)};
    } catch (...) {
      error = std::current_exception();
      frame[0] = std::byte{static_cast<std::uint8_t>(ValueStatus::Threw)};
    }
  }
  comm.broadcast(bytes_view(std::span<std::byte>(frame)), root, options);

  // 2. On failure the message follows, and every rank throws.
  if (frame[0] != std::byte{static_cast<std::uint8_t>(ValueStatus::Ready)}) {
    const std::string text = is_root ? exception_message(error) : std::string();
    const auto* first = reinterpret_cast<const std::byte*>(text.data());
    Blob message(first, first + text.size());
    broadcast_bytes(comm, message, root, options.timeout);
    if (is_root) std::rethrow_exception(error);
    throw Error(ErrorCode::RemoteError,
                fmt::format("{} threw on root {}: {}", what, root,
                            std::string_view(reinterpret_cast<const char*>(message.data()),
                                             message.size())));
  }
  std::memcpy(out.data(), frame.data() + 1, out.size());
}

void run_on_every_rank(Communicator& comm, const std::function<void()>& fn, std::string_view what,
                       const CollectiveOptions& options) {
  std::exception_ptr error;
  try {
    fn();
  } catch (...) {
    error = std::current_exception();
  }
  raise_failures_everywhere(comm, error, what, options);
}

void gather_fixed(Communicator& comm, std::span<const std::byte> mine, std::span<std::byte> out,
                  int root, const CollectiveOptions& options) {
  if (comm.size() == 1) {
    std::memcpy(out.data(), mine.data(), mine.size());
    return;
  }
  comm.gather(bytes_view(mine), comm.rank() == root ? bytes_view(out) : Buffer(), root, options);
}

}  // namespace detail

void broadcast_bytes(Communicator& comm, Blob& blob, int root,
                     std::optional<std::chrono::milliseconds> timeout) {
  broadcast_bytes_from(
      comm, blob, [](Blob&) {}, root, timeout);
}

void broadcast_bytes_from(Communicator& comm, Blob& blob, const std::function<void(Blob&)>& produce,
                          int root, std::optional<std::chrono::milliseconds> timeout) {
  const CollectiveOptions options = detail::checked_options("broadcast_bytes", comm, root, timeout);
  if (comm.size() == 1) {
    produce(blob);
    return;
  }
  // The length travels behind the root's status: a root that could not make its bytes fails
  // every rank at once.
  std::array<std::byte, sizeof(std::uint64_t)> raw{};
  detail::compute_and_broadcast_bytes(
      comm, raw,
      [&](std::span<std::byte> out) {
        produce(blob);
        const std::uint64_t length = blob.size();
        std::memcpy(out.data(), &length, sizeof length);
      },
      root, "broadcast_bytes: the root's data", options);
  std::uint64_t length = 0;
  std::memcpy(&length, raw.data(), sizeof length);
  if (comm.rank() != root) blob.resize(static_cast<std::size_t>(length));
  if (length > 0) comm.broadcast(bytes_view(std::span<std::byte>(blob)), root, options);
}

void broadcast_bytes_list(Communicator& comm, std::vector<Blob>& items, int root,
                          std::optional<std::chrono::milliseconds> timeout) {
  const CollectiveOptions options =
      detail::checked_options("broadcast_bytes_list", comm, root, timeout);
  if (comm.size() == 1) return;
  const bool is_root = comm.rank() == root;

  // 1. The count, then every item's size.
  std::uint64_t count = items.size();
  comm.broadcast(words_view({&count, 1}), root, options);
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(count));
  if (is_root) {
    for (std::size_t i = 0; i < items.size(); ++i) sizes[i] = items[i].size();
  }
  if (count > 0) comm.broadcast(words_view(sizes), root, options);

  // 2. The items' bytes back to back, in one broadcast.
  const std::vector<std::size_t> lengths = to_counts(sizes);
  Blob data(sum(lengths));
  if (is_root) {
    std::size_t offset = 0;
    for (const Blob& item : items) {
      std::copy(item.begin(), item.end(), data.begin() + static_cast<std::ptrdiff_t>(offset));
      offset += item.size();
    }
  }
  if (!data.empty()) comm.broadcast(bytes_view(std::span<std::byte>(data)), root, options);
  if (!is_root) items = split(data, lengths);
}

namespace {

std::vector<Blob> allgather_made(Communicator& comm, std::span<const std::byte> mine,
                                 const std::exception_ptr& error,
                                 std::optional<std::chrono::milliseconds> timeout) {
  const CollectiveOptions options = collective_options("allgather_bytes", timeout);
  if (comm.size() == 1) {
    if (error) std::rethrow_exception(error);
    return {Blob(mine.begin(), mine.end())};
  }

  // 1. Every rank's size (or its failure); 2. the bytes, laid out by those sizes.
  const std::vector<std::size_t> lengths =
      agreed_lengths(comm, mine.size(), error, "allgather_bytes", options);
  Blob all(sum(lengths));
  if (!all.empty()) {
    comm.allgatherv(bytes_view(mine), bytes_view(std::span<std::byte>(all)), lengths, options);
  }
  return split(all, lengths);
}

}  // namespace

std::vector<Blob> allgather_bytes(Communicator& comm, std::span<const std::byte> mine,
                                  std::optional<std::chrono::milliseconds> timeout) {
  return allgather_made(comm, mine, nullptr, timeout);
}

std::vector<Blob> allgather_bytes_from(Communicator& comm,
                                       const std::function<void(Blob&)>& produce,
                                       std::optional<std::chrono::milliseconds> timeout) {
  Blob mine;
  const std::exception_ptr error = made_by(produce, mine);
  return allgather_made(comm, mine, error, timeout);
}

std::vector<Blob> allgather_bytes_list(Communicator& comm, const std::vector<Blob>& mine,
                                       std::optional<std::chrono::milliseconds> timeout) {
  const CollectiveOptions options = collective_options("allgather_bytes_list", timeout);
  if (comm.size() == 1) return mine;
  const auto size = static_cast<std::size_t>(comm.size());

  // 1. How many items each rank has.
  const std::vector<std::size_t> counts = to_counts(allgather_words(comm, mine.size(), options));
  const std::size_t total_items = sum(counts);
  if (total_items == 0) return {};

  // 2. Every item's size, in rank order; they give each rank's byte total.
  std::vector<std::uint64_t> my_sizes(mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) my_sizes[i] = mine[i].size();
  std::vector<std::uint64_t> sizes(total_items);
  comm.allgatherv(words_view(my_sizes), words_view(sizes), counts, options);
  const std::vector<std::size_t> item_lengths = to_counts(sizes);
  std::vector<std::size_t> rank_bytes(size, 0);
  std::size_t item = 0;
  for (std::size_t r = 0; r < size; ++r) {
    for (std::size_t i = 0; i < counts[r]; ++i) rank_bytes[r] += item_lengths[item++];
  }

  // 3. The bytes: this rank's items packed, then one allgatherv.
  Blob packed;
  packed.reserve(rank_bytes[static_cast<std::size_t>(comm.rank())]);
  for (const Blob& blob : mine) packed.insert(packed.end(), blob.begin(), blob.end());
  Blob all(sum(rank_bytes));
  if (!all.empty()) {
    comm.allgatherv(bytes_view(std::span<const std::byte>(packed)),
                    bytes_view(std::span<std::byte>(all)), rank_bytes, options);
  }
  return split(all, item_lengths);
}

namespace {

std::vector<Blob> gather_made(Communicator& comm, std::span<const std::byte> mine,
                              const std::exception_ptr& error, int root,
                              std::optional<std::chrono::milliseconds> timeout) {
  const CollectiveOptions options = detail::checked_options("gather_bytes", comm, root, timeout);
  if (comm.size() == 1) {
    if (error) std::rethrow_exception(error);
    return {Blob(mine.begin(), mine.end())};
  }
  const bool is_root = comm.rank() == root;

  // 1. Every rank's size (or its failure), on every rank: gatherv takes the whole layout
  // everywhere.
  const std::vector<std::size_t> lengths =
      agreed_lengths(comm, mine.size(), error, "gather_bytes", options);
  const std::size_t total = sum(lengths);

  // 2. The bytes, to the root only.
  Blob all(is_root ? total : 0);
  if (total > 0) {
    comm.gatherv(bytes_view(mine), is_root ? bytes_view(std::span<std::byte>(all)) : Buffer(),
                 lengths, root, options);
  }
  return is_root ? split(all, lengths) : std::vector<Blob>{};
}

}  // namespace

std::vector<Blob> gather_bytes(Communicator& comm, std::span<const std::byte> mine, int root,
                               std::optional<std::chrono::milliseconds> timeout) {
  return gather_made(comm, mine, nullptr, root, timeout);
}

std::vector<Blob> gather_bytes_from(Communicator& comm, const std::function<void(Blob&)>& produce,
                                    int root, std::optional<std::chrono::milliseconds> timeout) {
  Blob mine;
  const std::exception_ptr error = made_by(produce, mine);
  return gather_made(comm, mine, error, root, timeout);
}

Buffer broadcast_buffer(Communicator& comm, const Buffer& in, int root,
                        std::optional<std::chrono::milliseconds> timeout) {
  const CollectiveOptions options = detail::checked_options(kBroadcastBuffer, comm, root, timeout);
  const bool is_root = comm.rank() == root;
  const std::optional<Error> refused = is_root ? refusal(in, root) : std::nullopt;
  if (comm.size() == 1) {
    if (refused) throw *refused;
    return in;
  }

  // 1. The header: the root's verdict, dtype and shape. A refusal is thrown on every rank.
  Blob header = is_root ? encode_header(in, refused) : Blob{};
  broadcast_bytes(comm, header, root, options.timeout);
  if (refused) throw *refused;
  Buffer out = is_root ? in : allocate_from_header(header);

  // 2. The data. Broadcast writes its output on every rank, the root included, so a read-only
  //    root buffer is staged into a writable copy there.
  if (out.nbytes() == 0) return out;
  Buffer wire;
  if (!is_root) {
    wire = Buffer::view(out.data(), out.nbytes(), DType::UInt8, out.device());
  } else if (!in.read_only()) {
    // Managed memory goes as host memory, which is what the other ranks receive into.
    const Device device = in.device().host_accessible() ? Device::cpu() : in.device();
    wire = Buffer::view(in.data(), in.nbytes(), DType::UInt8, device);
  } else {
    wire = Buffer::allocate(in.nbytes(), DType::UInt8);
    std::memcpy(wire.data(), in.data(), in.nbytes());
  }
  comm.broadcast(wire, root, options);
  return out;
}

}  // namespace cohort::train
