// Wall-clock time as the reference and the wire formats carry it (internal: shared with every module).
#pragma once

#include <chrono>

namespace kf {

/// Seconds since the Unix epoch with sub-second precision, from the system clock (Python's time.time(): the unit
/// of mtimes in the JSON wire format, Celery's timestamps and worker heartbeats).
inline double UnixTimeNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace kf
