// The verdict cache (see kernelfoundry/verdict_cache.hpp).
#include "kernelfoundry/verdict_cache.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "core/files.hpp"
#include "core/sha256.hpp"
#include "harness/isolation.hpp"
#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/harness.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "kernelfoundry/resources.hpp"
#include "kernelfoundry/worker_info.hpp"

namespace kf {
namespace {

constexpr int kEntryVersion = 1;

std::string EvolveCodeOf(const Task& task) {
  auto it = task.blocks.find("EVOLVE");
  return it == task.blocks.end() ? std::string() : BlocksToStr(it->second);
}

// The task evaluated for `candidate` (Evaluate's first step), results cleared.
Task CandidateTask(const Task& task, const std::optional<BlockUpdate>& candidate) {
  Task t = candidate ? task.WithBlocks(*candidate, /*keep_test_result_reference=*/false) : task;
  if (!candidate) {
    t.extract_code_result.reset();
    t.build_result.reset();
    t.build_result_reference.reset();
    t.test_result.reset();
    t.test_result_reference.reset();
  }
  return t;
}

// The fields of a key shared by evaluations and test stages: the candidate task (`t`, results cleared), the
// archs, what is tested and the worker fingerprint.
Json KeyFields(const Task& t, const std::vector<std::string>& archs, bool test_candidate, bool test_reference) {
  Json key = Json::object();
  key["version"] = kEntryVersion;
  key["task_hash_id"] = t.HashId();
  key["extract_ok"] = !(t.extract_code_result && t.extract_code_result->returncode != 0);
  key["config"] = t.config;
  key["hyperparameters"] = t.hyperparameters;
  key["has_build_step"] = t.has_build_step;
  key["has_reference_build_step"] = t.has_reference_build_step;
  key["archs"] = archs;
  key["test_candidate"] = test_candidate;
  key["test_reference"] = test_reference;
  key["worker"] = WorkerFingerprint(HarnessDescriptorFor(t.config).kind.name);
  return key;
}

// The file holding this code (kf, or the Python module's shared object) with its size and mtime.
Json BuildIdentity() {
  std::string file = "/proc/self/exe";
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&BuildIdentity), &info) != 0 && info.dli_fname != nullptr &&
      std::string_view(info.dli_fname).find(".so") != std::string_view::npos) {
    file = info.dli_fname;
  }
  std::error_code ec;
  std::filesystem::path path = std::filesystem::canonical(file, ec);
  struct stat st {};
  if (ec || ::stat(path.c_str(), &st) != 0) return Json{{"file", file}};
  return Json{{"file", path.string()},
              {"size", static_cast<int64_t>(st.st_size)},
              {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec}};
}

// The relative path, size and modification time of every regular file under `dir` (recursively; __pycache__
// skipped), hashed: a changed, added or removed file changes it. Cheap (no file is read).
std::string TreeStamp(const std::filesystem::path& dir) {
  std::vector<std::string> lines;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() == "__pycache__") {
      it.disable_recursion_pending();
      continue;
    }
    const std::string stamp = FileStamp(it->path());
    if (!stamp.empty()) lines.push_back(std::filesystem::relative(it->path(), dir).string() + " " + stamp);
  }
  std::sort(lines.begin(), lines.end());
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  return internal::Sha256Hex(all);
}

// What the evaluation's children run with besides the task: the filesystem isolation of build and test
// children, and the task-side resources of the harness kind (resources.hpp; native: the SDK, else the Python
// package and interpreter) with their files' stamps. A resource that cannot be found, or an unusable
// KF_ISOLATION, is keyed by its error: such a run never meets a stored verdict and fails as a fresh run does.
Json EnvironmentFingerprint(std::string_view harness_kind) {
  Json env = Json::object();
  // The machine-wide timing settings that change what the test stage measures (pipeline/test_stage.cc).
  for (const char* name : {"KF_TIMING_BUDGET_S", "KF_TIMING_PROCESSES"}) {
    const char* value = std::getenv(name);
    env["timing"][name] = value ? Json(value) : Json(nullptr);
  }
  try {
    env["isolation"] = ChildIsolationStatus();
  } catch (const Error& e) {
    env["isolation"] = std::string("error: ") + e.what();
  }
  try {
    if (!WorkerInfoNeedsPython(harness_kind)) {
      const TaskSdk sdk = FindTaskSdk();
      Json sources = Json::object();
      for (const auto& source : sdk.sources) sources[source.string()] = FileStamp(source);
      env["sdk"] = Json{{"include_dir", sdk.include_dir.string()},
                        {"headers", TreeStamp(sdk.include_dir)},
                        {"sources", std::move(sources)}};
    } else {
      const ResourceDir python = TaskPythonDir();
      env["python_package"] = Json{{"dir", python.path.string()}, {"files", TreeStamp(python.path / "kernelfoundry")}};
      env["python"] = TaskPythonInterpreter();
    }
  } catch (const Error& e) {
    env["resource_error"] = e.what();
  }
  return env;
}

std::string UtcNow() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::filesystem::path EntryPath(const std::filesystem::path& cache_dir, const std::string& key) {
  return cache_dir / "verdicts" / (key + ".json");
}

double NumberOr(const Json& j, const char* key, double fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

// The SHA-256 of a file map's paths, modes and bytes — not its mtimes: a build cache hit writes the same
// files at another time.
std::string ContentDigest(const MemoryFileMap& files) {
  std::vector<std::string> names = files.ListFiles();
  std::sort(names.begin(), names.end());
  std::string all;
  for (const std::string& name : names) {
    const FileMeta* meta = files.Meta(name);
    const std::string* bytes = files.Find(name);
    all += name + '\0' + (meta && meta->mode ? std::to_string(*meta->mode) : "-") + '\0' +
           internal::Sha256Hex(bytes != nullptr ? *bytes : std::string()) + '\n';
  }
  return internal::Sha256Hex(all);
}

// Reads the entry of `key` (nullopt: none, unreadable, malformed, another version or key).
std::optional<Json> ReadEntry(const std::filesystem::path& cache_dir, const std::string& key) {
  const std::optional<std::string> text = ReadFileBytes(EntryPath(cache_dir, key));
  if (!text) return std::nullopt;
  try {
    Json entry = ParseJson(*text, "<verdict cache>");
    if (!entry.is_object() || entry.value("version", 0) != kEntryVersion || entry.value("key", "") != key)
      return std::nullopt;
    return entry;
  } catch (const std::exception&) {
    return std::nullopt;  // a malformed entry is a miss; the fresh run overwrites it
  }
}

// Writes `entry` under `key` through a temp file and a rename. Throws on I/O errors.
bool WriteEntry(const std::filesystem::path& cache_dir, const std::string& key, const Json& entry) {
  const std::filesystem::path path = EntryPath(cache_dir, key);
  std::filesystem::create_directories(path.parent_path());
  ::chmod(path.parent_path().c_str(), 0700);  // kf's alone: no sandboxed child may read verdicts (issue 25)
  std::random_device rd;
  const std::filesystem::path tmp = path.string() + fmt::format(".tmp.{:08x}{:08x}", rd(), rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << DumpJson(entry);
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path);
  return true;
}

}  // namespace

bool IsCacheableStatus(EvalStatus status) {
  switch (status) {
    case EvalStatus::kCorrect:
    case EvalStatus::kNoReference:
    case EvalStatus::kNoMeasurement:
    case EvalStatus::kValueMismatch:
    case EvalStatus::kOutputChangedUnderTiming:
    case EvalStatus::kShapeMismatch:
    case EvalStatus::kTestsFailed:
    case EvalStatus::kInputMutated:
    case EvalStatus::kBuildError:
    case EvalStatus::kExtractionFailed:
      return true;
    default:
      return false;
  }
}

Json WorkerFingerprint(std::string_view harness_kind) {
  Json fp = GetWorkerInfo(harness_kind);
  fp["kf_build"] = BuildIdentity();
  fp["environment"] = EnvironmentFingerprint(harness_kind);
  return fp;
}

std::string VerdictCacheKey(const Task& task, const std::optional<BlockUpdate>& candidate,
                            const EvaluateOptions& options) {
  const Task t = CandidateTask(task, candidate);
  return internal::Sha256Hex(
      DumpJson(KeyFields(t, ResolveGpuArchs(t, options), options.test_candidate, options.test_reference)));
}

std::string TestStageCacheKey(const Task& task, const std::vector<std::string>& archs, bool test_candidate,
                              bool test_reference) {
  Json key = KeyFields(CandidateTask(task, std::nullopt), archs, test_candidate, test_reference);
  key["stage"] = "test";
  auto build = [](const std::optional<BuildResult>& b) -> Json {
    if (!b) return nullptr;
    return Json{{"ok", b->Ok()}, {"artifacts", b->artifacts ? Json(ContentDigest(*b->artifacts)) : Json(nullptr)}};
  };
  key["build"] = build(task.build_result);
  key["build_reference"] = build(task.build_result_reference);
  return internal::Sha256Hex(DumpJson(key));
}

bool IsCacheableTestStage(const TestStageResult& stage) {
  bool candidate_ran = false;
  auto cacheable = [](const std::optional<Classification>& c) { return !c || IsCacheableStatus(c->status); };
  for (const auto& [arch, runs] : stage.per_arch) {
    for (const auto& [key, run] : runs) {
      if (!run.correctness) return false;  // a variant that did not run
      if (key == "reference") {
        if (run.correctness->status != EvalStatus::kCorrect) return false;
      } else {
        candidate_ran = true;
        if (!cacheable(run.correctness)) return false;
      }
      if (!cacheable(run.performance)) return false;
    }
  }
  return candidate_ran;
}

EvalResult EvalResultFromJson(const Json& j) {
  if (!j.is_object()) throw Error(ErrorKind::kParse, "an EvalResult must be a JSON object", "<verdict cache>");
  EvalResult r;
  try {
    r.compiled = j.at("compiled").get<bool>();
    r.correctness = j.at("correctness").get<bool>();
    r.metadata = j.at("metadata");
    r.runtime = j.at("runtime").get<double>();
    r.runtime_stats = j.at("runtime_stats");
    r.runtime_improvement = j.at("runtime_improvement").get<double>();
    r.improve_over_compile = j.at("improve_over_compile").get<double>();
    r.perf_score = j.at("perf_score").get<int>();
    r.profiler_data = j.at("profiler_data");
    r.template_results = j.at("template_results");
    r.eval_log = j.at("eval_log").get<std::string>();
    std::optional<EvalStatus> status = EvalStatusFromName(j.at("status").get<std::string>());
    if (!status) throw Error(ErrorKind::kParse, "unknown status", "<verdict cache>", "status");
    r.status = *status;
    r.status_detail = j.at("status_detail").get<std::string>();
    for (const Json& b : j.at("benchmarks")) {
      BenchmarkRow row;
      row.arch = b.at("arch").get<std::string>();
      row.name = b.at("name").get<std::string>();
      row.reference_mean_ms = NumberOr(b, "reference_mean_ms", -1);
      row.candidate_mean_ms = NumberOr(b, "candidate_mean_ms", -1);
      row.speedup = NumberOr(b, "speedup", -1);
      row.num_trials = b.at("num_trials").get<int>();
      row.paired = b.at("paired").get<bool>();
      const Json& ci = b.at("speedup_ci");
      if (ci.is_array() && ci.size() == 2) {
        row.speedup_ci_low = ci[0].is_number() ? ci[0].get<double>() : -1;
        row.speedup_ci_high = ci[1].is_number() ? ci[1].get<double>() : -1;
      }
      r.benchmarks.push_back(std::move(row));
    }
    r.timing = j.contains("timing") ? j["timing"] : Json::object();
    r.isolation = j.contains("isolation") ? j["isolation"] : Json(nullptr);
  } catch (const Json::exception& e) {
    throw Error(ErrorKind::kParse, std::string("malformed EvalResult: ") + e.what(), "<verdict cache>");
  }
  return r;
}

std::optional<Evaluation> LookupVerdict(const std::filesystem::path& cache_dir, const std::string& key,
                                        const Task& task, const std::optional<BlockUpdate>& candidate) {
  const std::optional<Json> found = ReadEntry(cache_dir, key);
  if (!found || found->contains("stage")) return std::nullopt;
  try {
    const Json& entry = *found;
    Evaluation ev;
    ev.input_code = EvolveCodeOf(task);
    ev.task = CandidateTask(task, candidate);
    ev.output_code = EvolveCodeOf(ev.task);
    ev.archs = entry.at("archs").get<std::vector<std::string>>();
    ev.result = EvalResultFromJson(entry.at("result"));
    ev.combined_score = entry.at("combined_score").get<double>();
    ev.task.build_result = BuildResult::Decode(entry.at("build_result"));
    ev.task.build_result_reference = BuildResult::Decode(entry.at("build_result_reference"));
    ev.task.test_result = TestResult::Decode(entry.at("test_result"));
    ev.task.test_result_reference = TestResult::Decode(entry.at("test_result_reference"));
    ev.cached = Json{{"key", key}, {"job_id", entry.at("job_id")}, {"created_at", entry.at("created_at")}};
    return ev;
  } catch (const std::exception&) {
    return std::nullopt;  // a malformed entry is a miss; the fresh run overwrites it
  }
}

bool StoreVerdict(const std::filesystem::path& cache_dir, const std::string& key, const Evaluation& ev,
                  std::optional<int64_t> job_id) {
  if (!ev.cached.is_null() || !IsCacheableStatus(ev.result.status)) return false;
  try {
    auto encode = [](const auto& value) { return value ? value->Encode() : Json(nullptr); };
    Json entry = Json::object();
    entry["version"] = kEntryVersion;
    entry["key"] = key;
    entry["created_at"] = UtcNow();
    entry["job_id"] = job_id ? Json(*job_id) : Json(nullptr);
    entry["archs"] = ev.archs;
    entry["combined_score"] = ev.combined_score;
    entry["result"] = ev.result.ToJson();
    entry["build_result"] = encode(ev.task.build_result);
    entry["build_result_reference"] = encode(ev.task.build_result_reference);
    entry["test_result"] = encode(ev.task.test_result);
    entry["test_result_reference"] = encode(ev.task.test_result_reference);
    return WriteEntry(cache_dir, key, entry);
  } catch (const std::exception&) {
    return false;
  }
}

std::optional<CachedTestStage> LookupTestStage(const std::filesystem::path& cache_dir, const std::string& key) {
  const std::optional<Json> entry = ReadEntry(cache_dir, key);
  if (!entry || entry->value("stage", "") != "test" || !entry->contains("value")) return std::nullopt;
  return CachedTestStage{(*entry)["value"], Json{{"key", key}, {"created_at", entry->value("created_at", "")}}};
}

bool StoreTestStage(const std::filesystem::path& cache_dir, const std::string& key, const Json& value,
                    const TestStageResult& stage) {
  if (!IsCacheableTestStage(stage)) return false;
  try {
    return WriteEntry(cache_dir, key,
                      Json{{"version", kEntryVersion}, {"key", key}, {"stage", "test"}, {"created_at", UtcNow()},
                           {"value", value}});
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace kf
