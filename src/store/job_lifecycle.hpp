// The job lifecycle of store.hpp as one backend-neutral function: the current state of a jobs row plus a
// JobUpdate give the column assignments to write (implemented in store.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernelfoundry/json.hpp"
#include "kernelfoundry/store.hpp"

namespace kf::store {

/// What UpdateJob needs to know about the stored row.
struct JobState {
  std::string status;        ///< jobs.status as stored
  bool has_started = false;  ///< started_at is set
  bool has_finished = false; ///< finished_at is set
};

/// The column assignments ("status", "finished_at", "progress", "task_id", "config", "started_at" with
/// their new values) for applying `update` to a job in `state`, or nullopt when the job is CANCELED (then
/// nothing may be written). Rules: a terminal status sets finished_at (NowTimestamp()) when it is empty;
/// COMPLETE sets progress 1.0; progress is clamped to [0, 1]; `started` sets started_at once; explicit
/// started_at / finished_at values are written as given (finished_at then replaces the terminal default). Throws
/// kf::Error(kInvalidArgument, field "jobs.progress") for NaN progress.
std::optional<std::vector<std::pair<std::string_view, Json>>> PlanJobUpdate(const JobState& state,
                                                                            const JobUpdate& update);

}  // namespace kf::store
