// kf results — lists stored evaluations: rows of the `kernels` table with the status of their job, our
// detailed status (kf_status, e.g. value_mismatch; "-" for rows the reference wrote) beside the
// reference-compatible one.
//
//   kf results [--db PATH|URL] [--task NAME] [--job ID] [--last N] [--json] [--all-columns]
//   kf results --lineage UUID [--db …] [--json]
//
// --lineage prints the ancestry of one kernel (kf::KernelLineage: its ancestors through parent_uuid, the root
// first, then the kernel, then its children) with status and speedup per generation; exit 4 for an unknown uuid.
//
// The database is --db, else $KF_DB, else runs/kernels.sqlite3 (relative to the current directory): a SQLite
// path, sqlite:///path or postgresql://user@host:port/db (kf::OpenStore). It is opened read-only; a missing
// database is a kNotFound error (exit 4).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/run_common.hpp"
#include "cli/text_table.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/serve.hpp"
#include "kernelfoundry/store.hpp"

namespace kf::cli {
namespace {

struct ResultsOptions {
  std::string db;
  std::string task;
  std::optional<int64_t> job;
  int64_t last = 20;
  bool json = false;
  bool all_columns = false;
  std::string lineage;
};

/// Columns of --json (without --all-columns); job_status is added by ListKernels.
const std::vector<std::string> kJsonColumns = {
    "id",      "timestamp", "uuid",  "task_name", "task_id",   "job_id",  "status", "kf_status", "score",
    "runtime", "improve_over_native", "improve_over_compile", "gpu_arch", "runtime_stats", "eval_worker_info"};

std::string Cell(const Json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return DumpJson(v);
}

/// A number cell: "-" for null, for the reference's "not measured" value -1 and, with `hide_sentinel`, for
/// its "no reference runtime" speedup 9.999e-10.
std::string Number(const Json& v, const char* spec, bool hide_sentinel = false) {
  if (!v.is_number()) return Cell(v);
  double d = v.get<double>();
  if (d == -1.0 || (hide_sentinel && d > 0 && d < 1e-9)) return "-";
  return fmt::format(fmt::runtime(spec), d);
}

/// "YYYY-MM-DD HH:MM:SS" (UTC) from a stored timestamp (fractional seconds dropped).
std::string ShortTime(const Json& v) {
  std::string s = Cell(v);
  auto dot = s.find('.');
  return dot == std::string::npos ? s : s.substr(0, dot);
}

/// The interval cell of a stored row, from the paired timing kept in eval_worker_info[arch].timing (kf::KernelRow):
/// "2.62-2.73" (the 95 % interval) for one timed benchmark, "±1.8-2.4%" (the range of the half-widths) for several,
/// "-" for none (a row the reference wrote, or one timed alone).
std::string IntervalCell(const Json& eval_worker_info) {
  std::vector<std::pair<double, double>> cis;
  std::vector<double> halves;
  if (!eval_worker_info.is_object()) return "-";
  for (const auto& [arch, info] : eval_worker_info.items()) {
    const Json* benchmarks = info.is_object() && info.contains("timing") ? &info["timing"]["benchmarks"] : nullptr;
    if (benchmarks == nullptr || !benchmarks->is_object()) continue;
    for (const auto& [name, b] : benchmarks->items()) {
      const Json ci = b.value("ci", Json());
      if (!ci.is_array() || ci.size() != 2 || !ci[0].is_number() || !ci[1].is_number()) continue;
      cis.emplace_back(ci[0].get<double>(), ci[1].get<double>());
      halves.push_back(b.value("rel_half_width", 0.0) * 100);
    }
  }
  if (cis.empty()) return "-";
  if (cis.size() == 1) return fmt::format("{:.3g}-{:.3g}", cis[0].first, cis[0].second);
  const auto [lo, hi] = std::minmax_element(halves.begin(), halves.end());
  return fmt::format("±{:.2g}-{:.2g}%", *lo, *hi);
}

void PrintTable(const std::vector<Json>& rows) {
  using A = TextTable::Align;
  TextTable table({{"id", A::kRight},
                   {"timestamp (UTC)", A::kLeft},
                   {"task_name", A::kLeft},
                   {"job_id", A::kRight},
                   {"job_status", A::kLeft},
                   {"kf_status", A::kLeft},
                   {"ref_status", A::kLeft},
                   {"score", A::kRight},
                   {"runtime_ms", A::kRight},
                   {"speedup", A::kRight},
                   {"interval", A::kRight},
                   {"gpu_arch", A::kLeft}});
  for (const auto& r : rows) {
    table.AddRow({Cell(r["id"]), ShortTime(r["timestamp"]), Cell(r["task_name"]), Cell(r["job_id"]),
                  Cell(r["job_status"]), Cell(r["kf_status"]), Cell(r["status"]), Cell(r["score"]),
                  Number(r["runtime"], "{:.4g}"), Number(r["improve_over_native"], "{:.3g}x", true),
                  IntervalCell(r["eval_worker_info"]), Cell(r["gpu_arch"])});
  }
  std::fputs(table.Render().c_str(), stdout);
  if (rows.empty()) std::puts("(no stored evaluations match)");
}

/// kf results --lineage: one line per generation, the root first.
int PrintLineage(Store& store, const std::string& uuid, bool json) {
  auto lineage = KernelLineage(store, uuid);
  if (!lineage) throw Error(ErrorKind::kNotFound, "no kernel with this uuid", store.Describe(), uuid);
  if (json) {
    std::puts(DumpJson(*lineage, 2).c_str());
    return kExitOk;
  }
  using A = TextTable::Align;
  TextTable table({{"gen", A::kRight}, {"id", A::kRight}, {"uuid", A::kLeft}, {"status", A::kLeft},
                   {"speedup", A::kRight}, {"trial", A::kRight}, {"timestamp (UTC)", A::kLeft}, {"", A::kLeft}});
  int gen = 0;
  auto row = [&](const Json& n, const std::string& gen_text, const std::string& note) {
    table.AddRow({gen_text, Cell(n["id"]), Cell(n["uuid"]), Cell(n["status"]), Number(n["speedup"], "{:.3g}x"),
                  Cell(n["trial"]), ShortTime(n["timestamp"]), note});
  };
  if (!(*lineage)["missing_parent"].is_null()) {
    table.AddRow({"", "", Cell((*lineage)["missing_parent"]), "", "", "", "", "(parent not stored here)"});
  }
  for (const Json& a : (*lineage)["ancestors"]) {
    row(a, std::to_string(gen), gen == 0 ? "root" : "");
    ++gen;
  }
  row((*lineage)["kernel"], std::to_string(gen), "<- this kernel");
  for (const Json& c : (*lineage)["children"]) row(c, std::to_string(gen + 1), "child");
  std::fputs(table.Render().c_str(), stdout);
  return kExitOk;
}

int RunResults(const ResultsOptions& opts) {
  if (opts.last < 0) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("must be 0 (all) or a positive number, got {}", opts.last),
                {}, "--last");
  }
  std::string url = StoreUrlOf(opts.db);
  std::unique_ptr<Store> store;
  try {
    store = OpenStore(url, StoreOptions{.read_only = true});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound) throw;
    throw Error(ErrorKind::kNotFound,
                "no results database (run `kf run` first, or pass --db PATH or set KF_DB): " + e.message(), e.file());
  }
  if (!opts.lineage.empty()) return PrintLineage(*store, opts.lineage, opts.json);
  KernelQuery query;
  if (!opts.task.empty()) query.task_name = opts.task;
  query.job_id = opts.job;
  query.last_n = opts.last;
  if (opts.json && !opts.all_columns) query.columns = kJsonColumns;
  if (!opts.json) {
    query.columns = {"id",    "timestamp", "task_name", "job_id", "status", "kf_status",
                     "score", "runtime",   "improve_over_native", "gpu_arch", "eval_worker_info"};
  }
  std::vector<Json> rows = store->ListKernels(query);
  if (opts.json) {
    Json array = Json::array();
    for (auto& r : rows) array.push_back(std::move(r));
    std::puts(DumpJson(array, 2).c_str());
  } else {
    PrintTable(rows);
  }
  return kExitOk;
}

}  // namespace

KF_REGISTER_COMMAND("results", [](CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<ResultsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "results", "List stored evaluations (kernels rows with their job status), newest last");
  cmd->add_option("--db", opts->db, kDbOptionHelp);
  cmd->add_option("--task", opts->task, "Only evaluations of this task_name");
  cmd->add_option("--job", opts->job, "Only evaluations of this job id");
  cmd->add_option("--last", opts->last, "Only the newest N evaluations; 0 = all")->default_val(20);
  cmd->add_flag("--json", opts->json, "Print the rows as a JSON array instead of a table");
  cmd->add_flag("--all-columns", opts->all_columns, "With --json: every kernels column (code, logs, profiles)");
  cmd->add_option("--lineage", opts->lineage, "The ancestry of the kernel with this uuid (parents, then children)");
  cmd->callback([opts, exit_code]() { *exit_code = RunResults(*opts); });
});

}  // namespace kf::cli
