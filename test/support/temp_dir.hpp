#pragma once

// A fresh directory for one test, removed with everything in it at the end: where ranks leave
// evidence for the parent (a child's memory dies with it), rendezvous files and FIFOs live.

#include <filesystem>
#include <string>

namespace cohort::test {

class TempDir {
 public:
  /// Creates "<system temp dir>/<prefix>-XXXXXX" with mkdtemp (new, mode 0700). Throws
  /// std::runtime_error when it cannot.
  explicit TempDir(const std::string& prefix = "cohort-test");
  /// Removes the directory and its contents; errors are ignored (a destructor must not throw).
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace cohort::test
