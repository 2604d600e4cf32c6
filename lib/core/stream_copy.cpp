#include "core/stream_copy.hpp"

#include "core/copy_bytes.hpp"

#include <cstdint>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace cohort {

void stream_copy(void* dst, const void* src, std::size_t bytes) noexcept {
#if defined(__x86_64__)
  // SSE2 is part of x86-64, so no dispatch is needed; the stores are memory-bound either way.
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
  const std::size_t misalignment = reinterpret_cast<std::uintptr_t>(out) % 64;
  const std::size_t head = misalignment == 0 ? 0 : 64 - misalignment;
  if (bytes < head + 64) {
    copy_bytes(dst, src, bytes);
    return;
  }
  copy_bytes(out, in, head);
  out += head;
  in += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, out += 64, in += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(out), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 48), d);
  }
  copy_bytes(out, in, bytes);
  _mm_sfence();
#else
  copy_bytes(dst, src, bytes);
#endif
}

}  // namespace cohort
