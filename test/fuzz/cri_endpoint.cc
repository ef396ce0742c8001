// kruise::cri::SocketPathFromEndpoint (cri/endpoint.h): the CRI endpoint from flags and runtime
// discovery. Properties: an accepted endpoint gives an absolute path, and the endpoint discovery
// builds from it ("unix://" + path) gives the same path back.
#include <string>

#include "cri/endpoint.h"
#include "test/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::string> path = kruise::cri::SocketPathFromEndpoint(input);
  if (!path.ok()) return 0;
  FUZZ_CHECK(!path->empty() && (*path)[0] == '/') << "\"" << input << "\" gave \"" << *path << "\"";
  absl::StatusOr<std::string> again = kruise::cri::SocketPathFromEndpoint("unix://" + *path);
  FUZZ_CHECK(again.ok() && *again == *path)
      << "\"" << input << "\" gave \"" << *path << "\", unix://" << *path << " gives "
      << (again.ok() ? *again : again.status().ToString());
  return 0;
}
