// The isolation policy of build and test children (see isolation.hpp).
#include "harness/isolation.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "kernelfoundry/error.hpp"

namespace kf {
namespace fs = std::filesystem;

namespace {

enum class Mode { kOn, kRequired, kOff };

Mode ModeFromEnv() {
  const char* v = std::getenv("KF_ISOLATION");
  std::string s = v ? v : "";
  if (s.empty() || s == "on" || s == "1") return Mode::kOn;
  if (s == "required") return Mode::kRequired;
  if (s == "off" || s == "0") return Mode::kOff;
  throw Error(ErrorKind::kInvalidArgument, "expected on, required or off, got '" + s + "'", "environment",
              "KF_ISOLATION");
}

}  // namespace

std::string ChildIsolationStatus() {
  if (ModeFromEnv() == Mode::kOff) return "off (KF_ISOLATION=off)";
  return FilesystemIsolationSupport();
}

bool ChildIsolationApplied() { return ChildIsolationStatus().rfind("landlock", 0) == 0; }

void IsolateChild(ProcessOptions& options, const std::vector<fs::path>& writable, const fs::path& private_tmp) {
  const Mode mode = ModeFromEnv();
  std::error_code ec;
  fs::remove_all(private_tmp, ec);
  fs::create_directories(private_tmp, ec);
  if (ec) throw Error(ErrorKind::kIO, "cannot create the private temp dir: " + ec.message(), private_tmp.string());
  const std::string tmp = private_tmp.string();
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME", "POCL_CACHE_DIR", "TORCH_EXTENSIONS_DIR",
                           "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "MPLCONFIGDIR"}) {
    options.env_add[name] = tmp;
  }
  if (mode == Mode::kOff) return;
  FilesystemIsolation iso;
  iso.writable_paths = writable;
  iso.writable_paths.push_back(private_tmp);
  iso.required = mode == Mode::kRequired;
  options.filesystem_isolation = std::move(iso);
}

fs::path FreshRunDir(const fs::path& parent, const std::string& prefix) {
  std::string tmpl = (parent / (prefix + "XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw Error(ErrorKind::kIO, std::string("cannot create a run directory: ") + std::strerror(errno), tmpl);
  }
  return tmpl;
}

}  // namespace kf
