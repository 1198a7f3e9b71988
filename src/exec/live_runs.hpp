// Runs in flight, for kf's termination handler (AbortAllRunsForShutdown in process.hpp): each run registers
// a duplicate of its shepherd socket, so a kill can be sent whatever the runner thread is doing. Once a
// shutdown started, threads that start or finish a run are parked for good (the process is about to end and
// no half-finished result may be used). Internal to the exec module; thread-safe.
#pragma once

namespace kf::exec_internal {

/// Parks the calling thread forever when a shutdown has started.
void ParkIfShuttingDown();
/// Records the run `runner` whose shepherd socket is `sock` (duplicated). During a shutdown the tree is
/// killed at once instead.
void RegisterRun(const void* runner, int sock);
/// The run's tree is gone: forgets it; parks the thread when a shutdown has started.
void UnregisterRun(const void* runner);
/// Forgets the run without parking (a runner unwinding from an exception).
void ForgetRun(const void* runner);

}  // namespace kf::exec_internal
