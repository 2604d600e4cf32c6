#pragma once

// Whether this test binary runs under a sanitizer (AddressSanitizer, with UBSan in CI's build,
// or ThreadSanitizer): their runtimes reserve address space and open descriptors of their own,
// which a test of cohort's behaviour at a resource limit cannot account for.

namespace cohort::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace cohort::test
