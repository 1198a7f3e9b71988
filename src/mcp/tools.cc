// The tools of kf mcp (see tools.hpp): definitions, argument checks, the folder roots, and the local mode
// (kf::LoadTaskForRun, then the RecordJobFn into a job created first, so a cancellation can mark it).
#include "mcp/tools.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "kernelfoundry/config.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/memory_file_map.hpp"

namespace kf::mcp {
namespace fs = std::filesystem;

void CallContext::OnCancel(std::function<void()> hook) {
  std::unique_lock lock(mu_);
  if (canceled_) {
    lock.unlock();
    hook();
    return;
  }
  hook_ = std::move(hook);
}

void CallContext::RunCancelHook() {
  std::function<void()> hook;
  {
    std::lock_guard lock(mu_);
    canceled_ = true;
    hook = hook_;
  }
  if (hook) hook();
}

namespace {

Json Prop(const char* type, const char* description) { return {{"type", type}, {"description", description}}; }

Json Schema(Json properties, std::vector<std::string> required) {
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", required},
          {"additionalProperties", false}};
}

/// Checks `args` against the tool's inputSchema: an object, required keys present, known keys only, types.
void CheckArgs(const Json& schema, const Json& args) {
  if (!args.is_object()) throw InvalidParams{"arguments: expected an object"};
  for (const Json& r : schema["required"]) {
    if (!args.contains(r.get<std::string>())) throw InvalidParams{fmt::format("arguments.{}: required", r.get<std::string>())};
  }
  for (const auto& [key, value] : args.items()) {
    if (!schema["properties"].contains(key)) throw InvalidParams{fmt::format("arguments.{}: unknown argument", key)};
    const std::string type = schema["properties"][key]["type"].get<std::string>();
    const bool ok = (type == "string" && value.is_string()) || (type == "integer" && value.is_number_integer()) ||
                    (type == "boolean" && value.is_boolean()) || (type == "object" && value.is_object());
    if (!ok) throw InvalidParams{fmt::format("arguments.{}: expected {}", key, type)};
  }
}

std::string Str(const Json& args, const char* key) {
  return args.contains(key) && args[key].is_string() ? args[key].get<std::string>() : std::string();
}

/// ~ expanded, made absolute against the current directory.
fs::path Expand(const std::string& p) {
  if (p == "~" || p.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    return fs::path(home != nullptr ? home : "") / p.substr(std::min<size_t>(2, p.size()));
  }
  return fs::absolute(p);
}

}  // namespace

Json ToolDefinitions() {
  Json tools = Json::array();
  tools.push_back({{"name", "build_and_test"},
                   {"title", "Build and test a task folder"},
                   {"description",
                    "Builds, tests, times and scores the task package in folder_path (its current EVOLVE code against "
                    "its reference), locally or on the configured KernelFoundry server. Returns success, job_id, "
                    "eval_log, runtime_stats, speedup (or \"N/A\"), error, and kf's status, speedup_ci, benchmarks, "
                    "kernel_uuid, cached. The folder's .kernelfoundry/kernels.json records the evaluations; the "
                    "last one is the parent of the next."},
                   {"inputSchema", Schema({{"folder_path", Prop("string", "Task package folder (absolute or relative)")}},
                                          {"folder_path"})}});
  tools.push_back(
      {{"name", "evaluate_candidate"},
       {"title", "Evaluate a candidate without writing files"},
       {"description",
        "Evaluates new EVOLVE code for the task at task_path without changing its files: code replaces the one "
        "EVOLVE block, or blocks gives {KEY: content} / {KEY: {path: [content…]}}. parent_uuid records where it "
        "came from. Returns what build_and_test returns."},
       {"inputSchema",
        Schema({{"task_path", Prop("string", "Task package folder or archive")},
                {"code", Prop("string", "New content of the EVOLVE block")},
                {"blocks", Prop("object", "Block update {KEY: content} or {KEY: {path: [content, …]}}")},
                {"parent_uuid", Prop("string", "kernel_uuid of the evaluation this candidate was derived from")},
                {"lineage", Prop("object", "trial, version, prompt, answer, language_model, agent_session_id")}},
               {"task_path"})}});
  tools.push_back({{"name", "get_result"},
                   {"title", "One stored evaluation"},
                   {"description", "The stored evaluation with this kernel_id or uuid: verdict, eval_log, "
                                   "runtime_stats, speedup and interval, benchmarks, code, and its ancestors."},
                   {"inputSchema", Schema({{"kernel_id", Prop("integer", "kernels.id")},
                                           {"uuid", Prop("string", "kernels.uuid (kernel_uuid)")}},
                                          {})}});
  tools.push_back({{"name", "list_results"},
                   {"title", "Recent evaluations"},
                   {"description", "The newest stored evaluations (of one task when given), newest first."},
                   {"inputSchema", Schema({{"task", Prop("string", "task_name")},
                                           {"limit", Prop("integer", "How many (1-200, default 20)")}},
                                          {})}});
  tools.push_back({{"name", "validate_task"},
                   {"title", "Check a task package"},
                   {"description", "Checks the package in folder_path (structure, config, tests) and lists every "
                                   "problem; with run: true also runs the reference's own tests and the low-signal "
                                   "check (does a trivial output pass the value checks?)."},
                   {"inputSchema", Schema({{"folder_path", Prop("string", "Task package folder")},
                                           {"run", Prop("boolean", "Also run the reference (slower)")}},
                                          {"folder_path"})}});
  return tools;
}

struct Tools::Impl {
  McpOptions options;
  std::vector<fs::path> roots;
  std::mutex store_mu;
  std::unique_ptr<Store> store;

  Store& GetStore() {
    std::lock_guard lock(store_mu);
    if (!store) store = OpenStore(options.db.empty() ? DefaultStoreUrl() : options.db);
    return *store;
  }

  ClientConfig Client() const { return options.client ? *options.client : LoadClientConfig(); }

  /// `path` resolved (symlinks too), which must exist and lie inside a root.
  fs::path Allowed(const std::string& path, const char* arg) const {
    if (path.empty()) throw InvalidParams{fmt::format("arguments.{}: empty", arg)};
    std::error_code ec;
    const fs::path p = fs::canonical(Expand(path), ec);
    if (ec) throw Error(ErrorKind::kNotFound, "no such file or folder", path, arg);
    for (const fs::path& root : roots) {
      const auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
      if (r == root.end()) return p;
    }
    std::string list;
    for (const fs::path& root : roots) list += (list.empty() ? "" : ", ") + root.string();
    throw Error(ErrorKind::kUnsafe, fmt::format("outside the folders kf mcp may read ({}; kf mcp --root DIR)", list),
                path, arg);
  }

  Json Evaluate(const fs::path& task_path, const std::optional<BlockUpdate>& candidate, Lineage lineage,
                CallContext& ctx);
  Json BuildAndTest(const Json& args, CallContext& ctx);
  Json EvaluateCandidate(const Json& args, CallContext& ctx);
  Json GetResult(const Json& args);
  Json ListResults(const Json& args);
  Json ValidateTask(const Json& args);
};

Json Tools::Impl::Evaluate(const fs::path& task_path, const std::optional<BlockUpdate>& candidate, Lineage lineage,
                           CallContext& ctx) {
  ctx.Progress(2, "loading the task");
  TaskForRun loaded = LoadTaskForRun(task_path.string());
  Store& st = GetStore();
  const Json& origin = loaded.task.config.is_object() && loaded.task.config.contains("task_origin")
                           ? loaded.task.config["task_origin"]
                           : Json("custom");
  const int64_t job = st.CreateJob(origin.is_string() ? origin.get<std::string>() : "custom", loaded.task.config);
  // A cancellation marks the job CANCELED: RecordRun then records no kernel and its watcher stops the run.
  ctx.OnCancel([&st, job] { (void)st.UpdateJob(job, JobUpdate{.status = JobStatus::kCanceled}); });
  EvaluateOptions ev = options.evaluate;
  ev.stop = ctx.stop();
  auto phases = std::make_shared<std::atomic<int>>(0);
  ev.progress = [&ctx, phases](const PhaseEvent& e) {
    const int n = e.finished ? ++*phases : phases->load();
    ctx.Progress(std::min(95.0, 10.0 + 12.0 * n),
                 fmt::format("{} {} {}", PhaseName(e.phase), e.variant, e.finished ? (e.ok ? "done" : "failed") : "started"));
  };
  RecordOptions record;
  record.job_id = job;
  record.cancel_poll = std::chrono::milliseconds(500);
  record.lineage = std::move(lineage);
  Evaluation out;
  const RecordedRun r = (options.record ? options.record : RecordJobFn(EvaluateAndRecord))(st, loaded.task, candidate, ev,
                                                                                     record, &out);
  Json result = {{"success", false}, {"job_id", job}, {"runtime_stats", Json::object()}, {"speedup", "N/A"}};
  if (r.canceled || r.kernel_id == 0) {
    result["status"] = "canceled";
    result["eval_log"] = "canceled";
    result["error"] = "the evaluation was canceled";
    return result;
  }
  auto log = KernelEvalLog(st, r.kernel_id);
  if (log) {
    MergeVerdictExtras(*log, VerdictExtras(out, r.kernel_uuid));  // the paired intervals of this evaluation
    result.update(*log);
  }
  result["success"] = true;  // the job ran to its verdict (the reference's local meaning)
  result["job_id"] = job;
  result["correct"] = IsCorrectVerdict(out.result);
  result["kernel_id"] = r.kernel_id;
  result["kernel_uuid"] = r.kernel_uuid;
  result["cached"] = !out.cached.is_null();
  ctx.Progress(100, "done");
  return result;
}

Json Tools::Impl::BuildAndTest(const Json& args, CallContext& ctx) {
  const fs::path folder = Allowed(Str(args, "folder_path"), "folder_path");
  if (!fs::is_directory(folder)) throw Error(ErrorKind::kInvalidArgument, "not a directory", folder.string(), "folder_path");
  const ClientConfig c = Client();
  if (!c.server_url.empty()) return RemoteBuildAndTest(c, folder, ctx);
  const std::optional<std::string> parent = LastKernelUuid(folder);
  Lineage lineage;
  lineage.parent_uuid = parent;
  Json out = Evaluate(folder, std::nullopt, lineage, ctx);
  if (out.contains("kernel_uuid") && out["kernel_uuid"].is_string()) {
    AppendKernelUuids(folder, {out["kernel_uuid"].get<std::string>()});
  }
  out["parent_uuid"] = parent ? Json(*parent) : Json(nullptr);
  return out;
}

Json Tools::Impl::EvaluateCandidate(const Json& args, CallContext& ctx) {
  const fs::path task = Allowed(Str(args, "task_path"), "task_path");
  if (args.contains("code") == args.contains("blocks")) throw InvalidParams{"arguments: give exactly one of code, blocks"};
  const BlockUpdate update = args.contains("code") ? BlockUpdate{BlockUpdateShort{{"EVOLVE", args["code"].get<std::string>()}}}
                                                   : BlockUpdateFromJson(args["blocks"], "arguments.blocks");
  Json lineage_json = args.contains("lineage") ? args["lineage"] : Json::object();
  if (args.contains("parent_uuid")) lineage_json["parent_uuid"] = args["parent_uuid"];
  const Lineage lineage = LineageFromJson(lineage_json, "arguments.lineage");
  const ClientConfig c = Client();
  if (c.server_url.empty()) return Evaluate(task, update, lineage, ctx);
  // Server mode: the package with the candidate in place, as an archive (its overrides.yml put back).
  TaskForRun loaded = LoadTaskSource(task.string(), {.discover_tests = false});
  Task changed = loaded.task.WithBlocks(update);
  MemoryFileMap files = changed.task_data;
  if (loaded.metadata.is_object() && loaded.metadata.contains("overrides")) {
    files.Set("overrides.yml", DumpYaml(loaded.metadata["overrides"]));
  }
  std::map<std::string, std::string> form = {{"idsid", c.user}};
  const Json fields = LineageToJson(lineage);
  for (const auto& [k, v] : fields.items()) form[k] = v.is_string() ? v.get<std::string>() : v.dump();
  form.erase("db_user");
  return RemoteEvaluate(c, files.ToArchive(ArchiveFormat::kZip), task.filename().string() + ".zip", form, ctx);
}

Json Tools::Impl::GetResult(const Json& args) {
  if (args.contains("kernel_id") == args.contains("uuid")) throw InvalidParams{"arguments: give exactly one of kernel_id, uuid"};
  const ClientConfig c = Client();
  if (!c.server_url.empty()) {
    int64_t id = 0;
    if (args.contains("kernel_id")) {
      id = args["kernel_id"].get<int64_t>();
    } else {
      const Json page = RemoteGet(c, "/api/kernels", {{"uuid", Str(args, "uuid")}, {"limit", "1"}});
      if (page.value("kernels", Json::array()).empty()) throw Error(ErrorKind::kNotFound, "no kernel with this uuid", Str(args, "uuid"));
      id = page["kernels"][0]["id"].get<int64_t>();
    }
    return RemoteGet(c, fmt::format("/api/kernels/{}/eval_log", id), {});
  }
  Store& st = GetStore();
  int64_t id = 0;
  if (args.contains("kernel_id")) {
    id = args["kernel_id"].get<int64_t>();
  } else {
    KernelQuery q;
    q.uuid = Str(args, "uuid");
    q.columns = {"id"};
    auto rows = st.ListKernels(q);
    if (rows.empty()) throw Error(ErrorKind::kNotFound, "no kernel with this uuid", *q.uuid, "uuid");
    id = rows[0]["id"].get<int64_t>();
  }
  auto out = KernelEvalLog(st, id);
  if (!out) throw Error(ErrorKind::kNotFound, fmt::format("no kernel with id {}", id), st.Describe(), "kernel_id");
  if ((*out)["uuid"].is_string()) {
    if (auto lineage = KernelLineage(st, (*out)["uuid"].get<std::string>())) {
      (*out)["ancestors"] = (*lineage)["ancestors"];
      (*out)["children"] = (*lineage)["children"];
    }
  }
  return *out;
}

Json Tools::Impl::ListResults(const Json& args) {
  const int64_t limit = args.contains("limit") ? args["limit"].get<int64_t>() : 20;
  if (limit < 1 || limit > 200) throw InvalidParams{"arguments.limit: expected 1..200"};
  const ClientConfig c = Client();
  if (!c.server_url.empty()) {
    std::multimap<std::string, std::string> q = {{"limit", std::to_string(limit)}, {"order", "desc"}};
    if (args.contains("task")) q.emplace("task", Str(args, "task"));
    return RemoteGet(c, "/api/kernels", q);
  }
  KernelQuery q;
  if (args.contains("task")) q.task_name = Str(args, "task");
  q.descending = true;
  q.limit = limit;
  q.columns = {"id",    "uuid",    "parent_uuid", "task_name", "job_id", "kf_status", "status",
               "score", "improve_over_native", "trial", "version", "timestamp", "db_user", "language_model"};
  Json kernels = Json::array();
  for (const Json& k : GetStore().ListKernels(q)) kernels.push_back(LineageNode(k));
  return {{"kernels", std::move(kernels)}};
}

Json Tools::Impl::ValidateTask(const Json& args) {
  const fs::path folder = Allowed(Str(args, "folder_path"), "folder_path");
  const bool run = args.value("run", false);
  if (options.validate) return options.validate(folder.string(), run);
  try {
    (void)LoadTaskForRun(folder.string());
    return {{"valid", true}, {"problems", Json::array()}};
  } catch (const Error& e) {
    return {{"valid", false}, {"problems", Json::array({e.what()})}};
  }
}

Tools::Tools(McpOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  std::vector<fs::path> roots = impl_->options.roots;
  if (roots.empty()) roots.push_back(fs::current_path());
  for (const fs::path& r : roots) {
    std::error_code ec;
    fs::path c = fs::canonical(Expand(r.string()), ec);
    if (ec || !fs::is_directory(c)) throw Error(ErrorKind::kNotFound, "expected an existing directory", r.string(), "root");
    impl_->roots.push_back(c);
  }
}

Tools::~Tools() = default;

Json Tools::Call(const std::string& name, const Json& args, CallContext& ctx) {
  static const Json defs = ToolDefinitions();
  const Json* def = nullptr;
  for (const Json& d : defs) {
    if (d["name"] == name) def = &d;
  }
  if (def == nullptr) throw InvalidParams{fmt::format("unknown tool \"{}\" (tools/list names them)", name)};
  CheckArgs((*def)["inputSchema"], args);
  if (name == "build_and_test") return impl_->BuildAndTest(args, ctx);
  if (name == "evaluate_candidate") return impl_->EvaluateCandidate(args, ctx);
  if (name == "get_result") return impl_->GetResult(args);
  if (name == "list_results") return impl_->ListResults(args);
  return impl_->ValidateTask(args);
}

}  // namespace kf::mcp
