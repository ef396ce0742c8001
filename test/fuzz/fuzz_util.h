#pragma once

// Helpers shared by the fuzz targets (docs/conventions.md "Fuzzing").
//
//  - FUZZ_CHECK(cond) << ...: a property that must hold; prints the message and aborts, which
//    libFuzzer reports as a crash and saves the input.
//  - AllocationMeter: bytes malloc'ed by this thread between Start and Stop (ASan's allocator
//    hooks), for "a decoder never allocates more than a bounded multiple of its input" (in the
//    spirit of Kubernetes' FuzzDecodeAllocations). libFuzzer's -malloc_limit_mb still catches a
//    single huge allocation and -rss_limit_mb the total.
//  - SplitInput: one input as several documents, split at the byte '\x01' (never valid inside a
//    JSON text, and rare enough in mutations that most inputs hold whole documents).

#include <sanitizer/allocator_interface.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace kruise::fuzz {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond) {
    out_ << file << ":" << line << ": property failed: " << cond << "\n";
  }
  [[noreturn]] ~CheckFailure() {
    std::fputs(out_.str().c_str(), stderr);
    std::fputc('\n', stderr);
    std::abort();
  }
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    out_ << v;
    return *this;
  }

 private:
  std::ostringstream out_;
};

// A loop rather than if/else, so that `if (x) FUZZ_CHECK(y) << ...;` has no dangling else.
#define FUZZ_CHECK(cond)                                                                      \
  for (bool fuzz_check_ok_ = static_cast<bool>(cond); !fuzz_check_ok_; fuzz_check_ok_ = true) \
  ::kruise::fuzz::CheckFailure(__FILE__, __LINE__, #cond)

// Counts what this thread allocates between Start() and Stop(). Not reentrant.
class AllocationMeter {
 public:
  AllocationMeter() { Install(); }
  void Start() {
    bytes_ = 0;
    count_ = 0;
    active_ = true;
  }
  void Stop() { active_ = false; }
  size_t bytes() const { return bytes_; }
  size_t count() const { return count_; }

  // Runs `fn` and fails when it allocated more than `per_byte` * input_size + `slack` bytes.
  template <typename Fn>
  void Bound(const char* what, size_t input_size, size_t per_byte, size_t slack, Fn&& fn) {
    Start();
    fn();
    Stop();
    const size_t limit = per_byte * input_size + slack;
    FUZZ_CHECK(bytes_ <= limit) << what << " allocated " << bytes_ << " bytes in " << count_
                                << " allocations for " << input_size << " input bytes (limit "
                                << limit << ")";
  }

 private:
  static void OnMalloc(const volatile void*, size_t size) {
    if (active_) {
      bytes_ += size;
      ++count_;
    }
  }
  static void OnFree(const volatile void*) {}
  static void Install() {
    static bool installed = (__sanitizer_install_malloc_and_free_hooks(OnMalloc, OnFree), true);
    (void)installed;
  }
  static inline thread_local bool active_ = false;
  static inline thread_local size_t bytes_ = 0;
  static inline thread_local size_t count_ = 0;
};

inline std::vector<std::string_view> SplitInput(const uint8_t* data, size_t size, size_t parts) {
  std::vector<std::string_view> out;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (out.size() + 1 < parts) {
    size_t cut = rest.find('\x01');
    if (cut == std::string_view::npos) break;
    out.push_back(rest.substr(0, cut));
    rest.remove_prefix(cut + 1);
  }
  out.push_back(rest);
  return out;
}

}  // namespace kruise::fuzz
