// TempDir (core/temp_dir.hpp).
#include "core/temp_dir.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstring>

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
}

TempDir::~TempDir() {
  if (keep_ || path_.empty()) return;
  std::error_code ec;
  // Builds may leave read-only directories behind; make them removable first.
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory() && !it->is_symlink()) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
  }
  fs::remove_all(path_, ec);
}

}  // namespace kf
