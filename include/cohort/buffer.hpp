#pragma once

/// Buffer: cohort's minimal tensor. A typed, shaped view of memory on some device, optionally
/// keeping the memory's owner alive. Buffers are cheap handles (copying one copies the view, not
/// the data), so collectives take them by const reference and write through them.

#include <cohort/device.hpp>
#include <cohort/dtype.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace cohort {

class Buffer {
 public:
  /// An empty buffer: no data, shape {0}, dtype Float32, on the CPU.
  Buffer();

  /// A non-owning 1-D view of `count` elements at `data`. The caller keeps the memory alive.
  /// Throws InvalidArgument when data is null and count > 0.
  static Buffer view(void* data, std::size_t count, DType dtype, Device device = Device::cpu());
  /// As above, but read-only: collectives refuse to write to it.
  static Buffer view(const void* data, std::size_t count, DType dtype,
                     Device device = Device::cpu());
  /// A non-owning N-D view. `strides` are in elements; empty means row-major contiguous.
  /// `owner` (may be null) is kept alive as long as any Buffer sharing this view exists.
  /// Throws InvalidArgument for negative or overflowing shapes, null data with a non-empty shape,
  /// strides whose length differs from the shape's, or a byte offset that is negative or whose
  /// sum with the byte size leaves the int64 range.
  static Buffer view(void* data, std::vector<std::int64_t> shape, DType dtype, Device device,
                     std::vector<std::int64_t> strides = {}, std::int64_t byte_offset = 0,
                     std::shared_ptr<void> owner = nullptr, bool read_only = false);

  /// An owning, 64-byte-aligned, zero-filled host allocation of `count` elements (1-D).
  static Buffer allocate(std::size_t count, DType dtype);
  /// An owning, zero-filled allocation of `count` elements (1-D) on `device`: cpu as above;
  /// cuda:N device memory and cuda_host pinned host memory through the CUDA runtime (freed when
  /// the last Buffer sharing it goes). Throws Unsupported when cohort has no CUDA runtime or the
  /// device does not exist, InvalidArgument for cuda_managed (not offered).
  static Buffer allocate(std::size_t count, DType dtype, Device device);
  /// An owning, 64-byte-aligned, zero-filled host allocation of the given shape.
  static Buffer allocate(std::vector<std::int64_t> shape, DType dtype);
  /// An owning, zero-filled host allocation of `count` elements (1-D) that the other ranks of
  /// this host can map: collectives whose buffers on every rank lie in such memory let peers
  /// read and write them in place instead of copying (README, "Mappable buffers"). Each one is
  /// a memfd that stays open while the allocation lives (one file descriptor each),
  /// page-aligned. Freed when the last Buffer sharing it goes (views, slices and DLPack exports
  /// count too): then kept, pages and all, for a later allocate_mappable of its size or up to a
  /// fifth smaller, so that a buffer allocated every step faults its pages in only once
  /// (COHORT_MAPPABLE_CACHE_MIB bounds what a process keeps, default 1024, and at most 32 kept
  /// allocations hold a file descriptor each; the longest-kept go first; 0 keeps none). What is
  /// not kept, or was live when a collective of this process failed or when it forked, leaves
  /// the file at once, even while peers still map it. Unlike
  /// ordinary memory it is shared, not copied, with a child this process forks (each sees the
  /// other's writes; the child letting go of it frees nothing, and once the parent frees it the
  /// child's view reads zeros). If a collective over
  /// it fails on this rank, peers writing into its output stop within the piece they are
  /// writing, which may land after the failure returned here. Thread-safe. Throws SystemError
  /// when the kernel refuses (no memfd, out of descriptors or memory).
  static Buffer allocate_mappable(std::size_t count, DType dtype);
  /// The bytes of freed mappable allocations this process keeps for reuse now (see
  /// allocate_mappable). Thread-safe.
  static std::size_t kept_mappable_bytes() noexcept;
  /// Lets go of every kept mappable allocation, returning its pages and file descriptor to the
  /// system now (as torch.cuda.empty_cache() does for its cache): for a process about to need
  /// the memory or descriptors elsewhere. Live allocations are not touched; later frees keep
  /// again. Returns the bytes let go. Thread-safe.
  static std::size_t release_kept_mappable() noexcept;

  /// Concatenates along dim 0 into a new host allocation. All parts must share dtype and
  /// trailing dims, and be host-accessible. Throws InvalidArgument naming the first mismatch.
  static Buffer concat(std::span<const Buffer> parts);

  /// Address of the first element (base pointer plus byte offset). Null for an empty view.
  void* data() const noexcept {
    return base_ == nullptr ? nullptr : static_cast<char*>(base_) + byte_offset_;
  }
  template <class T>
  T* data_as() const noexcept {
    return static_cast<T*>(data());
  }
  DType dtype() const noexcept { return dtype_; }
  Device device() const noexcept { return device_; }
  const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  /// Strides in elements; empty means row-major contiguous.
  const std::vector<std::int64_t>& strides() const noexcept { return strides_; }
  std::int64_t byte_offset() const noexcept { return byte_offset_; }
  bool read_only() const noexcept { return read_only_; }
  int ndim() const noexcept { return static_cast<int>(shape_.size()); }
  /// Number of elements (product of the shape).
  std::size_t count() const noexcept { return count_; }
  std::size_t nbytes() const noexcept { return count_ * dtype_size(dtype_); }
  std::size_t element_size() const noexcept { return dtype_size(dtype_); }
  /// Row-major contiguous, ignoring the strides of size-1 dimensions (torch reports arbitrary
  /// strides for those).
  bool is_contiguous() const noexcept {
    return strides_.empty() || count_ == 0 || strides_are_contiguous();
  }
  /// The object kept alive by this buffer (null for plain views).
  const std::shared_ptr<void>& owner() const noexcept { return owner_; }

  /// Rows [begin, end) along dim 0, sharing memory. Needs a contiguous buffer with ndim >= 1.
  Buffer slice(std::int64_t begin, std::int64_t end) const;
  /// The same memory seen as a 1-D buffer of count() elements (contiguous buffers only).
  Buffer flat() const;
  /// The same memory with another shape of equal element count (contiguous buffers only).
  Buffer reshape(std::vector<std::int64_t> shape) const;
  /// A read-only handle to the same memory.
  Buffer as_read_only() const;

  /// A new host allocation where dimension `dim` is extended to `size` elements, the new entries
  /// set to `fill` (converted to the dtype). With pad_first the padding goes before the data.
  /// Throws InvalidArgument when size is smaller than the current extent or dim is out of range.
  Buffer pad(int dim, std::int64_t size, double fill = 0.0, bool pad_first = false) const;

  /// Throws InvalidArgument unless contiguous, naming `what` (e.g. "allreduce output").
  void require_contiguous(const char* what) const;

 private:
  /// is_contiguous() for a non-empty buffer with explicit strides.
  bool strides_are_contiguous() const noexcept;
  void* base_ = nullptr;
  DType dtype_ = DType::Float32;
  Device device_{};
  std::vector<std::int64_t> shape_{0};
  std::vector<std::int64_t> strides_{};
  std::int64_t byte_offset_ = 0;
  std::size_t count_ = 0;
  bool read_only_ = false;
  std::shared_ptr<void> owner_;
};

}  // namespace cohort
