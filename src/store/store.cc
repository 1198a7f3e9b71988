// Backend-independent parts of kernelfoundry/store.hpp: job statuses and the job lifecycle
// (job_lifecycle.hpp), the EvalResult → kernels column helpers (spec §5.6), read-API value types,
// timestamps, the default user and database path.
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fmt/format.h>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/store.hpp"
#include "store/job_lifecycle.hpp"

namespace kf {
namespace {

constexpr std::array<std::pair<JobStatus, std::string_view>, 7> kStatusNames{{
    {JobStatus::kInit, "INIT"},
    {JobStatus::kRun, "RUN"},
    {JobStatus::kValidating, "VALIDATING"},
    {JobStatus::kComplete, "COMPLETE"},
    {JobStatus::kFail, "FAIL"},
    {JobStatus::kCanceled, "CANCELED"},
    {JobStatus::kValidated, "VALIDATED"},
}};

/// Python truthiness of a JSON value (what `if v.get(key):` tests in the reference).
bool Truthy(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>() != 0;
  if (v.is_number_float()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();  // object, array, binary
}

Json NullIfEmpty(Json v) { return v.empty() ? Json(nullptr) : v; }

}  // namespace

std::string_view JobStatusName(JobStatus status) {
  for (const auto& [s, name] : kStatusNames) {
    if (s == status) return name;
  }
  return "INIT";
}

JobStatus ParseJobStatus(std::string_view name) {
  for (const auto& [s, n] : kStatusNames) {
    if (n == name) return s;
  }
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("unknown job status '{}' (expected INIT, RUN, VALIDATING, COMPLETE, FAIL, CANCELED or "
                          "VALIDATED)",
                          name),
              {}, "jobs.status");
}

bool IsTerminal(JobStatus status) {
  return status == JobStatus::kComplete || status == JobStatus::kFail || status == JobStatus::kCanceled ||
         status == JobStatus::kValidated;
}

KernelSort ParseKernelSort(std::string_view name) {
  constexpr std::array<std::pair<std::string_view, KernelSort>, 5> kSorts{{{"id", KernelSort::kId},
                                                                          {"timestamp", KernelSort::kTimestamp},
                                                                          {"score", KernelSort::kScore},
                                                                          {"runtime", KernelSort::kRuntime},
                                                                          {"speedup", KernelSort::kSpeedup}}};
  for (const auto& [n, sort] : kSorts) {
    if (n == name) return sort;
  }
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("unknown sort key '{}' (expected id, timestamp, score, runtime or speedup)", name), {},
              "sort");
}

Json ApiToken::ToJson() const {
  return {{"id", id},
          {"user", user},
          {"admin", admin},
          {"created_at", created_at},
          {"revoked_at", revoked_at ? Json(*revoked_at) : Json(nullptr)}};
}

Json TaskSummary::ToJson() const {
  return Json{{"task_name", task_name},
              {"kernels", kernels},
              {"by_kf_status", by_kf_status},
              {"by_status", by_status},
              {"best_speedup", best_speedup ? Json(*best_speedup) : Json(nullptr)},
              {"last_timestamp", last_timestamp}};
}

Json KernelPoint::ToJson() const {
  return Json{{"id", id},
              {"timestamp", timestamp},
              {"status", status},
              {"kf_status", kf_status},
              {"speedup", speedup ? Json(*speedup) : Json(nullptr)},
              {"score", score ? Json(*score) : Json(nullptr)}};
}

namespace store {

std::optional<std::vector<std::pair<std::string_view, Json>>> PlanJobUpdate(const JobState& state,
                                                                            const JobUpdate& update) {
  if (update.progress && std::isnan(*update.progress)) {
    throw Error(ErrorKind::kInvalidArgument, "progress is NaN", {}, "jobs.progress");
  }
  if (state.status == JobStatusName(JobStatus::kCanceled)) return std::nullopt;
  std::vector<std::pair<std::string_view, Json>> sets;
  std::optional<double> progress = update.progress;
  if (progress) progress = std::clamp(*progress, 0.0, 1.0);
  if (update.status) {
    sets.emplace_back("status", std::string(JobStatusName(*update.status)));
    if (IsTerminal(*update.status) && !state.has_finished && !update.finished_at) {
      sets.emplace_back("finished_at", NowTimestamp());
    }
    if (*update.status == JobStatus::kComplete) progress = 1.0;
  }
  if (progress) sets.emplace_back("progress", *progress);
  if (update.task_id) sets.emplace_back("task_id", *update.task_id);
  if (update.config) sets.emplace_back("config", *update.config);
  if (update.started_at) {
    sets.emplace_back("started_at", *update.started_at);
  } else if (update.started && !state.has_started) {
    sets.emplace_back("started_at", NowTimestamp());
  }
  if (update.finished_at) sets.emplace_back("finished_at", *update.finished_at);
  return sets;
}

}  // namespace store

ProfilerDataColumns SplitProfilerData(const Json& profiler_data) {
  ProfilerDataColumns out;
  if (!profiler_data.is_object()) return out;
  Json candidate = Json::object(), reference = Json::object();
  for (const auto& [key, value] : profiler_data.items()) {
    constexpr std::string_view kSuffix = "_ref";
    if (key.size() >= kSuffix.size() && key.compare(key.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0) {
      reference[key.substr(0, key.size() - kSuffix.size())] = value;
    } else {
      candidate[key] = value;
    }
  }
  // The timeline and lineinfo of each profiler can be very large: they go to the *_detail* columns.
  auto split = [](Json& small) {
    Json detail = Json::object();
    for (auto& [name, data] : small.items()) {
      if (!data.is_object()) continue;
      for (const char* big : {"timeline", "lineinfo"}) {
        auto it = data.find(big);
        if (it == data.end() || it->is_null()) continue;
        detail[name][big] = std::move(*it);
        data.erase(big);
      }
    }
    return detail;
  };
  Json candidate_detail = split(candidate);
  Json reference_detail = split(reference);
  out.profiler_data = NullIfEmpty(std::move(candidate));
  out.profiler_data_reference = NullIfEmpty(std::move(reference));
  out.profiler_data_detail = NullIfEmpty(std::move(candidate_detail));
  out.profiler_data_detail_reference = NullIfEmpty(std::move(reference_detail));
  return out;
}

WorkerInfoColumns SplitWorkerInfos(const Json& metadata) {
  WorkerInfoColumns out;
  if (!metadata.is_object()) return out;
  for (const auto& [arch, meta] : metadata.items()) {
    if (!meta.is_object()) continue;  // e.g. "error": "..." entries
    if (auto it = meta.find("compile_worker_info"); it != meta.end() && Truthy(*it)) {
      out.compile_worker_info[arch] = *it;
    }
    if (auto it = meta.find("eval_worker_info"); it != meta.end() && Truthy(*it)) {
      out.eval_worker_info[arch] = *it;
    }
  }
  return out;
}

std::string NowTimestamp() {
  auto now = std::chrono::system_clock::now();
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1000000);
  long micros = static_cast<long>(us % 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}.{:06d}", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros);
}

std::string DefaultDbUser() {
  std::string user;
  for (const char* var : {"LOGNAME", "USER", "LNAME", "USERNAME"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') {
      user = v;
      break;
    }
  }
  if (user.empty()) {
    std::array<char, 4096> buf{};
    passwd pw{};
    passwd* found = nullptr;
    if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
        found->pw_name != nullptr) {
      user = found->pw_name;
    }
  }
  if (user.empty()) user = "unknown";
  // VARCHAR(128) holds characters; cut on a UTF-8 boundary.
  size_t chars = 0;
  for (size_t i = 0; i < user.size(); ++i) {
    if ((static_cast<unsigned char>(user[i]) & 0xC0) != 0x80 && ++chars > 128) {
      user.resize(i);
      break;
    }
  }
  return user;
}

std::filesystem::path DefaultDbPath() {
  const char* env = std::getenv("KF_DB");
  if (env != nullptr && *env != '\0') return env;
  return std::filesystem::path("runs") / "kernels.sqlite3";
}

std::string DefaultStoreUrl() { return DefaultDbPath().string(); }

}  // namespace kf
