// What kf does when it is stopped by a signal (see termination.cc).
#pragma once

#include <functional>

namespace kf::cli {

/// Blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT in the calling thread (call first thing in main, before any
/// thread starts, so every thread inherits the mask) and starts the one thread that takes them. By default a
/// signal stops kf: kill the child trees, remove the live work dirs, end with the signal's default action.
void InstallTerminationCleanup();

/// A verb that stops cleanly by itself (kf serve, kf worker) takes the signals over: while a handler is set,
/// every signal goes to it, called on the signal thread (it must return promptly: request the stop, do not
/// wait for it), and kf keeps running. An empty function gives the signals back to the default cleanup.
/// Clear the handler before what it refers to is destroyed (TerminationHandlerScope does).
void SetTerminationHandler(std::function<void(int signal)> handler);

/// Sets a termination handler for the scope's lifetime.
class TerminationHandlerScope {
 public:
  explicit TerminationHandlerScope(std::function<void(int signal)> handler) {
    SetTerminationHandler(std::move(handler));
  }
  ~TerminationHandlerScope() { SetTerminationHandler({}); }
  TerminationHandlerScope(const TerminationHandlerScope&) = delete;
  TerminationHandlerScope& operator=(const TerminationHandlerScope&) = delete;
};

}  // namespace kf::cli
