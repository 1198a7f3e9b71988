// Cache directory — where kf keeps its persistent caches (test collection, builds), chosen so that it
// never depends on HOME being writable (issue 10, fault 5).
//
// Contract: ResolveCacheDir() picks, in order, $KF_CACHE_DIR (explicit: used as given, never replaced by a
// fallback), $XDG_CACHE_HOME/kernelfoundry, $HOME/.cache/kernelfoundry, and finally a per-user directory
// <temp dir>/kernelfoundry-<uid> created with mode 0700 and accepted only when it is a real directory (no
// symlink) owned by the calling user and not writable by group or others (a directory another user planted
// there is refused, not shared). A candidate is usable when it exists or can be created and is writable.
// When none is usable the choice carries the path tried last and the reason: callers that need the cache
// report an infrastructure error naming that path (never the candidate's fault). Reads the environment and
// creates directories; thread-safe (no shared state).
#pragma once

#include <filesystem>
#include <string>

namespace kf {

/// The chosen cache directory, or why there is none.
struct CacheDirChoice {
  std::filesystem::path path;   ///< absolute; the last one tried when unusable
  std::string source;           ///< "KF_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "per-user temp dir"
  std::string problem;          ///< empty = usable; else e.g. "cannot create /x/y: Permission denied"
  bool usable() const { return problem.empty(); }
};

/// Resolves the cache directory as described above (creating it when needed). Never throws.
CacheDirChoice ResolveCacheDir();

}  // namespace kf
