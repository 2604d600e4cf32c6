// Packing and describing an op's announcement (see announcement.hpp).

#include "algorithms/announcement.hpp"

#include <cohort/dtype.hpp>

#include <type_traits>

namespace cohort::algorithms {
namespace {

constexpr unsigned kRootBits = 12;
constexpr unsigned kBytesBits = 38;
constexpr std::uint64_t kNoDtype = 0x1f;
constexpr std::uint64_t kNoOp = 0xf;
constexpr std::uint64_t kNoRoot = (1u << kRootBits) - 1;
constexpr std::uint64_t kNoBytes = (std::uint64_t{1} << kBytesBits) - 1;
constexpr std::uint64_t kSingleCopy = std::uint64_t{1} << 63;
/// The reduce-op field of a measured broadcast, scatter or gather whose root's call is in place
/// (out of place leaves kNoOp there): beyond every ReduceOp.
constexpr std::uint64_t kRootInPlace = 0xe;
constexpr unsigned kOpShift = 50;
static_assert(static_cast<std::uint64_t>(ReduceOp::BXor) < kRootInPlace,
              "the reduce-op field's in-place mark must not be a reduce op");
/// The root field of the measured choice's vote (an allreduce): beyond any world size.
constexpr std::uint64_t kVoteRoot = kNoRoot - 1;
static_assert(kCollectiveCount <= 16, "the collective field has 4 bits");

std::uint64_t pack(Collective kind, std::uint64_t dtype, std::uint64_t op, std::uint64_t root,
                   std::uint64_t bytes) {
  return ((static_cast<std::uint64_t>(kind) & 0xf) << 59) | ((dtype & 0x1f) << 54) |
         ((op & 0xf) << kOpShift) | ((root & kNoRoot) << kBytesBits) | (bytes & kNoBytes);
}

std::uint64_t bytes_field(std::size_t bytes) {
  // All ones means "not compared"; a real count that happens to equal it is compared as such.
  return static_cast<std::uint64_t>(bytes) & kNoBytes;
}

}  // namespace

template <class Args>
std::uint64_t announcement_of(const Args& args, std::size_t bytes, Algorithm algorithm) {
  std::uint64_t dtype = kNoDtype, op = kNoOp, root = kNoRoot;
  if constexpr (requires { args.dtype; }) dtype = static_cast<std::uint64_t>(args.dtype);
  if constexpr (requires { args.op; }) op = static_cast<std::uint64_t>(args.op);
  if constexpr (requires { args.root; }) root = static_cast<std::uint64_t>(args.root);
  std::uint64_t field = bytes_field(bytes);
  if constexpr (requires { args.uniform; }) {
    if (!args.uniform) field = kNoBytes;
  }
  return pack(collective_of(args), dtype, op, root, field) |
         (algorithm == Algorithm::SingleCopy ? kSingleCopy : 0);
}

template <class Args>
std::uint64_t announcement_of(const Args& args, std::size_t bytes, Algorithm algorithm,
                              CallForm form) {
  static_assert(std::is_same_v<Args, BroadcastArgs> || std::is_same_v<Args, ScatterArgs> ||
                    std::is_same_v<Args, GatherArgs>,
                "only the rooted movers' form is the root's alone");
  const std::uint64_t plain = announcement_of(args, bytes, algorithm);
  if (form == CallForm::OutOfPlace) return plain;
  return (plain & ~(std::uint64_t{0xf} << kOpShift)) | (kRootInPlace << kOpShift);
}

template std::uint64_t announcement_of(const BroadcastArgs&, std::size_t, Algorithm, CallForm);
template std::uint64_t announcement_of(const ScatterArgs&, std::size_t, Algorithm, CallForm);
template std::uint64_t announcement_of(const GatherArgs&, std::size_t, Algorithm, CallForm);

CallForm announced_form(std::uint64_t announcement) {
  return ((announcement >> kOpShift) & 0xf) == kRootInPlace ? CallForm::InPlace
                                                            : CallForm::OutOfPlace;
}

Algorithm announced_algorithm(std::uint64_t announcement) {
  return (announcement & kSingleCopy) != 0 ? Algorithm::SingleCopy : Algorithm::SharedMemory;
}

template std::uint64_t announcement_of(const AllreduceArgs&, std::size_t, Algorithm);
template std::uint64_t announcement_of(const BroadcastArgs&, std::size_t, Algorithm);
template std::uint64_t announcement_of(const ReduceArgs&, std::size_t, Algorithm);
template std::uint64_t announcement_of(const AllgatherArgs&, std::size_t, Algorithm);
template std::uint64_t announcement_of(const GatherArgs&, std::size_t, Algorithm);
template std::uint64_t announcement_of(const ScatterArgs&, std::size_t, Algorithm);
template std::uint64_t announcement_of(const ReduceScatterArgs&, std::size_t, Algorithm);
template std::uint64_t announcement_of(const AlltoallArgs&, std::size_t, Algorithm);
template std::uint64_t announcement_of(const BarrierArgs&, std::size_t, Algorithm);

std::uint64_t vote_announcement() {
  return pack(Collective::Allreduce, static_cast<std::uint64_t>(DType::Float64),
              static_cast<std::uint64_t>(ReduceOp::Max), kVoteRoot, 2 * sizeof(double));
}

std::string describe_announcement(std::uint64_t a) {
  const auto kind = static_cast<Collective>((a >> 59) & 0xf);
  const std::uint64_t dtype = (a >> 54) & 0x1f;
  const std::uint64_t op = (a >> kOpShift) & 0xf;
  const std::uint64_t root = (a >> kBytesBits) & kNoRoot;
  const std::uint64_t bytes = a & kNoBytes;
  if (kind == Collective::Allreduce && root == kVoteRoot)
    return "the measured choice's vote (which of the arena and single copy runs a size class of "
           "an op)";
  std::string text(collective_name(kind));
  if (kind != Collective::Barrier) {
    text += bytes == kNoBytes ? std::string(" of per-rank counts")
                              : " of " + std::to_string(bytes) + " bytes";
  }
  // Only the rooted movers mark a form; a reduction's field holds its op.
  const bool root_in_place =
      op == kRootInPlace &&
      (kind == Collective::Broadcast || kind == Collective::Scatter ||
       kind == Collective::Scatterv || kind == Collective::Gather || kind == Collective::Gatherv);
  std::string details;
  if (dtype != kNoDtype) details = std::string(dtype_name(static_cast<DType>(dtype)));
  if (op != kNoOp && !root_in_place)
    details +=
        (details.empty() ? "" : ", ") + std::string(reduce_op_name(static_cast<ReduceOp>(op)));
  if (root != kNoRoot) details += (details.empty() ? "root " : ", root ") + std::to_string(root);
  if (root_in_place) details += ", in place at the root";
  if (a & kSingleCopy) details += details.empty() ? "single copy" : ", single copy";
  if (!details.empty()) text += " (" + details + ")";
  return text;
}

}  // namespace cohort::algorithms
