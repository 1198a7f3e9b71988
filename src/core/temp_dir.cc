// TempDir (core/temp_dir.hpp).
#include "core/temp_dir.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstring>

#include "core/live_dirs.hpp"
#include "kernelfoundry/error.hpp"

namespace kf {
namespace fs = std::filesystem;

TempDir::TempDir(const fs::path& root, const std::string& prefix, bool keep) : keep_(keep) {
  std::error_code ec;
  const fs::path base = root.empty() ? fs::temp_directory_path(ec) : root;
  if (base.empty()) throw Error(ErrorKind::kIO, "no temporary directory: " + ec.message(), "$TMPDIR");
  fs::create_directories(base, ec);
  std::string tmpl = (base / (prefix + "XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw Error(ErrorKind::kIO, std::string("cannot create a temporary directory: ") + std::strerror(errno), tmpl);
  }
  path_ = tmpl;
  // Removed by kf's termination handler when kf is stopped by a signal meanwhile (issue 10, item 8).
  if (!keep_) internal::RegisterLiveDir(path_);
}

void TempDir::set_keep(bool keep) {
  if (keep && !keep_) internal::UnregisterLiveDir(path_);
  if (!keep && keep_) internal::RegisterLiveDir(path_);
  keep_ = keep;
}

TempDir::~TempDir() {
  if (keep_ || path_.empty()) return;
  internal::UnregisterLiveDir(path_);
  // Builds may leave read-only directories behind; RemoveTree makes them removable first.
  internal::RemoveTree(path_);
}

}  // namespace kf
