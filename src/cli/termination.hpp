// Cleanup when kf is stopped by a signal (see termination.cc).
#pragma once

namespace kf::cli {

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (call first thing in main, before any thread
/// starts, so every thread inherits the mask) and starts the thread that handles them: kill the child
/// trees, remove the live work dirs, end with the signal's default action.
void InstallTerminationCleanup();

}  // namespace kf::cli
