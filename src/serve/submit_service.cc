// The job side of kf serve's submission API (see submit_service.hpp).
#include "serve/submit_service.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/sha256.hpp"
#include "core/temp_dir.hpp"
#include "kernelfoundry/error.hpp"

namespace kf {

std::string NewApiToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw Error(ErrorKind::kIO, "OpenSSL RAND_bytes failed", "token");
  std::string out = "kf_";
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

std::string ApiTokenHash(std::string_view token) { return internal::Sha256Hex(token); }

namespace serve {
namespace {

/// The HTTP status of a task package the loader refused: 413 for an exceeded limit (a bomb, too many
/// files), else 400.
int StatusOf(const Error& e) { return e.kind() == ErrorKind::kLimit ? 413 : 400; }

}  // namespace

SubmitService::SubmitService(Store& store, SubmitOptions options) : store_(store), options_(std::move(options)) {
  if (!options_.record) {
    options_.record = EvaluateAndRecord;
  }
  options_.workers = std::max(1, options_.workers);
}

SubmitService::~SubmitService() {
  for (auto& w : workers_) w.request_stop();
  cv_.notify_all();
  workers_.clear();  // joins: running jobs finish first
}

void SubmitService::Start() {
  for (int64_t id : store_.ActiveSubmissions()) {
    auto s = store_.GetSubmission(id, false);
    if (!s) continue;
    std::lock_guard lock(mu_);
    queue_.push_back({id, s->user});
    ++active_by_user_[s->user];
    std::fprintf(stderr, "kf serve: resuming job %lld of %s\n", static_cast<long long>(id), s->user.c_str());
  }
  if (!options_.run_jobs) return;
  for (int i = 0; i < options_.workers; ++i) {
    workers_.emplace_back([this](std::stop_token stop) { Worker(stop); });
  }
}

std::optional<ApiToken> SubmitService::Authenticate(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || authorization.substr(0, kBearer.size()) != kBearer) return std::nullopt;
  std::string_view token = authorization.substr(kBearer.size());
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.empty() || token.size() > 512) return std::nullopt;
  const std::string hash = ApiTokenHash(token);
  for (const auto& [t, stored] : store_.FindApiTokens(hash)) {
    if (stored.size() == hash.size() && CRYPTO_memcmp(stored.data(), hash.data(), hash.size()) == 0) return t;
  }
  return std::nullopt;
}

std::optional<ApiRefusal> SubmitService::TakeRequest(const std::string& user) {
  const double capacity = std::max(1, options_.limits.requests_per_minute);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  auto [it, fresh] = buckets_.try_emplace(user, Bucket{capacity, now});
  Bucket& b = it->second;
  if (!fresh) {
    const double elapsed = std::chrono::duration<double>(now - b.at).count();
    b.tokens = std::min(capacity, b.tokens + elapsed * capacity / 60.0);
    b.at = now;
  }
  if (b.tokens < 1.0) {
    const int wait = static_cast<int>(std::ceil((1.0 - b.tokens) * 60.0 / capacity));
    return ApiRefusal{429, fmt::format("more than {} requests per minute from {}", options_.limits.requests_per_minute,
                                       user),
                      std::max(1, wait)};
  }
  b.tokens -= 1.0;
  return std::nullopt;
}

int64_t SubmitService::Submit(const std::string& user, std::string_view archive, const std::string& filename,
                              const Lineage& lineage) {
  const SubmitLimits& lim = options_.limits;
  if (static_cast<int64_t>(archive.size()) > lim.max_archive_bytes) {
    throw ApiRefusal{413, fmt::format("{}: the archive has {} bytes, more than the limit of {}", filename,
                                      archive.size(), lim.max_archive_bytes)};
  }
  if (archive.empty()) throw ApiRefusal{400, fmt::format("{}: the archive is empty", filename)};
  {
    std::lock_guard lock(mu_);
    size_t total = 0;
    for (const auto& [u, n] : active_by_user_) total += static_cast<size_t>(n);
    if (active_by_user_[user] >= lim.max_active_jobs) {
      throw ApiRefusal{429, fmt::format("{} has {} jobs queued or running (the limit); wait for one to end", user,
                                        active_by_user_[user]),
                       5};
    }
    if (static_cast<int64_t>(total) >= lim.max_queued_total) {
      throw ApiRefusal{429, fmt::format("the server has {} jobs queued or running (the limit)", total), 10};
    }
  }
  // The package goes through the one loading path of kf run (archive checks, validation, overrides.yml).
  TaskForRun loaded;
  {
    TempDir dir({}, "kf_submit_");
    const std::filesystem::path path = dir.path() / "package.zip";
    {
      std::FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr) throw Error(ErrorKind::kIO, "cannot write the upload", path.string());
      const bool ok = std::fwrite(archive.data(), 1, archive.size(), f) == archive.size();
      if (std::fclose(f) != 0 || !ok) throw Error(ErrorKind::kIO, "cannot write the upload", path.string());
    }
    try {
      loaded = LoadTaskForRun(path.string());
    } catch (const Error& e) {
      std::string msg = e.what();
      // Name the upload, not the temporary path.
      for (size_t at = msg.find(path.string()); at != std::string::npos; at = msg.find(path.string())) {
        msg.replace(at, path.string().size(), filename);
      }
      throw ApiRefusal{StatusOf(e), msg};
    }
  }
  Submission s;
  s.user = user;
  s.task = loaded.task.EncodeToString();
  s.lineage = LineageToJson(lineage);
  s.archive_bytes = static_cast<int64_t>(archive.size());
  const int64_t id = store_.CreateSubmission(s, loaded.task.config);
  {
    std::lock_guard lock(mu_);
    queue_.push_back({id, user});
    ++active_by_user_[user];
  }
  cv_.notify_all();
  return id;
}

JobStatus SubmitService::Cancel(int64_t job_id) {
  const JobStatus now = ParseJobStatus(store_.GetJob(job_id)["status"].get<std::string>());
  if (IsTerminal(now)) return now;
  (void)store_.UpdateJob(job_id, JobUpdate{.status = JobStatus::kCanceled});
  std::lock_guard lock(mu_);
  if (auto it = running_.find(job_id); it != running_.end()) it->second.request_stop();
  auto q = std::find_if(queue_.begin(), queue_.end(), [job_id](const Queued& j) { return j.job_id == job_id; });
  if (q != queue_.end()) {
    if (--active_by_user_[q->user] <= 0) active_by_user_.erase(q->user);
    queue_.erase(q);
  }
  return JobStatus::kCanceled;
}

bool SubmitService::MaySee(const ApiToken& who, int64_t job_id) const {
  if (who.admin) return true;
  auto s = store_.GetSubmission(job_id, false);
  return s && s->user == who.user;
}

std::pair<size_t, size_t> SubmitService::QueuedAndRunning() {
  std::lock_guard lock(mu_);
  return {queue_.size(), running_.size()};
}

std::optional<SubmitService::Queued> SubmitService::TakeNext() {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (running_by_user_[it->user] < std::max(1, options_.limits.max_running_jobs)) {
      Queued j = *it;
      queue_.erase(it);
      return j;
    }
  }
  return std::nullopt;
}

void SubmitService::Worker(std::stop_token stop) {
  while (!stop.stop_requested()) {
    Queued job;
    {
      std::unique_lock lock(mu_);
      std::optional<Queued> next;
      cv_.wait(lock, stop, [&] { return (next = TakeNext()).has_value(); });
      if (!next) return;  // stop requested
      job = *next;
      ++running_by_user_[job.user];
      running_.emplace(job.job_id, std::stop_source());
    }
    RunJob(job, stop);
    {
      std::lock_guard lock(mu_);
      running_.erase(job.job_id);
      if (--running_by_user_[job.user] <= 0) running_by_user_.erase(job.user);
      if (--active_by_user_[job.user] <= 0) active_by_user_.erase(job.user);
    }
    cv_.notify_all();
  }
}

void SubmitService::RunJob(const Queued& job, std::stop_token) {
  std::stop_token token;
  {
    std::lock_guard lock(mu_);
    token = running_.at(job.job_id).get_token();
  }
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "kf serve: job %lld failed: %s\n", static_cast<long long>(job.job_id), why.c_str());
    try {
      if (store_.UpdateJob(job.job_id, JobUpdate{.status = JobStatus::kFail}) == JobUpdateOutcome::kCanceled) return;
      JobLog log;
      log.job_id = job.job_id;
      log.level = "ERROR";
      log.message = "kf serve: " + why;
      store_.InsertJobLogs({log});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kf serve: cannot record the failure of job %lld: %s\n",
                   static_cast<long long>(job.job_id), e.what());
    }
  };
  try {
    auto s = store_.GetSubmission(job.job_id, true);
    if (!s) return fail("the submission is no longer stored");
    const Task task = Task::DecodeFromString(s->task, fmt::format("job {}", job.job_id));
    RecordOptions record;
    record.job_id = job.job_id;
    record.cancel_poll = options_.cancel_poll;
    record.lineage = LineageFromJson(s->lineage, fmt::format("job {} lineage", job.job_id));
    record.lineage.db_user = s->user;
    EvaluateOptions ev = options_.evaluate;
    ev.stop = token;
    Evaluation out;
    const RecordedRun r = options_.record(store_, task, std::nullopt, ev, record, &out);
    if (r.kernel_id != 0) store_.SetSubmissionResult(job.job_id, VerdictExtras(out, r.kernel_uuid));
  } catch (const std::exception& e) {
    // RecordRun marked the job FAIL already (unless CANCELED); the reason goes to its logs.
    fail(e.what());
  }
}

}  // namespace serve
}  // namespace kf
