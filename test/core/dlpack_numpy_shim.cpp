// Test-only shared module that lets dlpack_numpy_test.py hand numpy's DLPack tensors to cohort
// and cohort's to numpy through ctypes. Every entry point is extern "C" and never throws.

#include <cohort/dlpack_versioned.h>
#include <cohort/dlpack.hpp>
#include <cohort/error.hpp>

#include "core/float_formats.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

namespace {

void write_report(char* report, int report_len, const std::string& text) {
  if (report == nullptr || report_len <= 0) return;
  std::snprintf(report, static_cast<std::size_t>(report_len), "%s", text.c_str());
}

std::string dims(const std::vector<std::int64_t>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(values[i]);
  }
  text += ']';
  return text;
}

// The buffer most recently exported, watched without keeping it alive.
std::weak_ptr<void> g_exported_owner;
void* g_exported_data = nullptr;

}  // namespace

extern "C" {

/// Imports a legacy DLManagedTensor (taking ownership), writes start + i to the element with
/// row-major logical index i (following the tensor's strides), and describes what it saw in
/// `report`. The Buffer is released before returning, which must run the producer's deleter.
/// Returns 0 on success, 1 with the error text in `report` otherwise.
int shim_import_fill(void* managed, double start, char* report, int report_len,
                     unsigned long long* data_out) {
  try {
    const cohort::Buffer b = cohort::from_dlpack(static_cast<DLManagedTensor*>(managed));
    if (!b.device().host_accessible())
      throw cohort::Error(cohort::ErrorCode::InvalidArgument, "not host memory");
    std::vector<std::int64_t> strides = b.strides();
    if (strides.empty()) {
      strides.resize(b.shape().size());
      std::int64_t step = 1;
      for (std::size_t d = b.shape().size(); d-- > 0;) {
        strides[d] = step;
        step *= b.shape()[d];
      }
    }
    std::vector<std::int64_t> index(b.shape().size(), 0);
    for (std::size_t i = 0; i < b.count(); ++i) {
      std::int64_t offset = 0;
      for (std::size_t d = 0; d < index.size(); ++d) offset += index[d] * strides[d];
      cohort::fp::store_from_double(b.dtype(), b.data(), static_cast<std::size_t>(offset),
                                    start + static_cast<double>(i));
      for (std::size_t d = index.size(); d-- > 0;) {  // odometer over the logical index
        if (++index[d] < b.shape()[d]) break;
        index[d] = 0;
      }
    }
    *data_out = reinterpret_cast<std::uintptr_t>(b.data());
    write_report(report, report_len,
                 "dtype=" + std::string(cohort::dtype_name(b.dtype())) +
                     " shape=" + dims(b.shape()) + " strides=" + dims(b.strides()) +
                     " contiguous=" + (b.is_contiguous() ? "1" : "0") +
                     " device=" + b.device().to_string());
    return 0;
  } catch (const std::exception& e) {
    write_report(report, report_len, e.what());
    return 1;
  }
}

/// Exports a new float64 Buffer holding i * 0.5, as a legacy DLManagedTensor (null on failure).
void* shim_export(int count) {
  try {
    cohort::Buffer b =
        cohort::Buffer::allocate(static_cast<std::size_t>(count), cohort::DType::Float64);
    for (int i = 0; i < count; ++i) b.data_as<double>()[i] = 0.5 * i;
    g_exported_owner = b.owner();
    g_exported_data = b.data();
    return cohort::to_dlpack(b);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shim_export: %s\n", e.what());
    return nullptr;
  }
}

/// Whether the memory of the last export is still alive (someone holds the tensor).
int shim_export_alive() {
  return g_exported_owner.expired() ? 0 : 1;
}

/// Address of the last export's first element.
unsigned long long shim_export_data() {
  return reinterpret_cast<std::uintptr_t>(g_exported_data);
}

/// Element i of the last export, read through cohort's view (NaN once it is gone).
double shim_export_read(int i) {
  const std::shared_ptr<void> alive = g_exported_owner.lock();
  if (!alive) return __builtin_nan("");
  return static_cast<const double*>(g_exported_data)[i];
}

/// Writes element i of the last export through cohort's view (ignored once it is gone).
void shim_export_write(int i, double value) {
  const std::shared_ptr<void> alive = g_exported_owner.lock();
  if (alive) static_cast<double*>(g_exported_data)[i] = value;
}

/// PyCapsule destructor for capsules named "dltensor": a capsule nobody consumed still owns its
/// tensor and must release it; a consumer renames it "used_dltensor" and takes over. Python's
/// capsule functions are looked up in the running interpreter, so this module needs no
/// Python headers or library at link time.
void shim_capsule_destructor(void* capsule) {
  using IsValid = int (*)(void*, const char*);
  using GetPointer = void* (*)(void*, const char*);
  static const auto is_valid = reinterpret_cast<IsValid>(dlsym(RTLD_DEFAULT, "PyCapsule_IsValid"));
  static const auto get_pointer =
      reinterpret_cast<GetPointer>(dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer"));
  if (is_valid == nullptr || get_pointer == nullptr) return;
  if (!is_valid(capsule, "dltensor")) return;
  auto* tensor = static_cast<DLManagedTensor*>(get_pointer(capsule, "dltensor"));
  if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
}

}  // extern "C"
