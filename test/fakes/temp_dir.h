#pragma once

// TempDir: a directory under $TMPDIR (std::filesystem::temp_directory_path), removed with its
// content when the object goes. For tests; path() is empty if it could not be made.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kruise::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "kruise-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `content` to path()/name (creating sub-directories) and returns the full path.
  std::string Write(const std::string& name, const std::string& content) const {
    std::filesystem::path p = std::filesystem::path(path_) / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
    return p.string();
  }

 private:
  std::string path_;
};

}  // namespace kruise::testing
