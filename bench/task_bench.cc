// task_bench — Task::Create (cold: no discovery cache, Python runs; cached: no Python), WithBlocks, and
// encode -> JSON text -> decode, on a generated 50 MB task of 1,200 files (like the reference's "big_dir")
// and on the relu_cpu fixture. Each figure is printed with its throughput, its ratio to an in-run
// baseline over the same bytes (plain memcpy + base64 of every file: the least work any encoder must do),
// and the reference's median from fixtures/golden/micro_timings.json where it measured the same thing.
//
//   task_bench [--quick]      (--quick: fewer repetitions)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/blocks.hpp"
#include "kernelfoundry/error.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/pytest_collect.hpp"
#include "kernelfoundry/task.hpp"

namespace fs = std::filesystem;

namespace {

constexpr size_t kFiles = 1200;
constexpr size_t kTargetBytes = 52'660'690;  // the reference's big_dir_bytes

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median wall seconds of `reps` runs of f (setup, untimed, runs before each).
double Median(int reps, const std::function<void()>& f, const std::function<void()>& setup = {}) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    if (setup) setup();
    double s = Now();
    f();
    t.push_back(Now() - s);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void WriteFile(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

// A task package: config, task.py (2 correctness + 1 performance test, numpy/torch free), conftest.py,
// kernel.py with an EVOLVE block, and data files (half text, half binary) up to ~50 MB.
void MakeBigTask(const fs::path& dir) {
  WriteFile(dir / "config.yaml", "task_name: big\njob_name: big_bench\ntask_origin: custom\nlanguage: python\n"
                                 "gpu_arch: cpu\nhas_build_step: false\nhas_reference_build_step: false\n");
  WriteFile(dir / "conftest.py", "from kernelfoundry.conftest import *\n");
  WriteFile(dir / "kernel.py", "# [EVOLVE_START]\ndef f(x):\n    return x + 1\n# [EVOLVE_END]\n");
  WriteFile(dir / "task.py",
            "import pytest\nfrom kernelfoundry import TestBase\nfrom kernel import f\n\n\n"
            "class TestBig(TestBase):\n    @pytest.mark.parametrize('v', [1, 2])\n"
            "    def test_f(self, v):\n        assert f(v) == v + 1\n\n"
            "    @pytest.mark.performance\n    def test_benchmark(self, measure_runtime):\n"
            "        measure_runtime(f, lambda: None, args=(1,))\n");
  const size_t data_files = kFiles - 4;
  const size_t each = kTargetBytes / data_files;
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < data_files; ++i) {
    std::string bytes(each, '\0');
    const bool text = i % 2 == 0;
    for (char& c : bytes) c = static_cast<char>(text ? 'a' + rng() % 26 : rng() & 0xff);
    if (text)
      for (size_t k = 80; k < bytes.size(); k += 81) bytes[k] = '\n';
    char name[64];
    std::snprintf(name, sizeof name, "data/%02zu/blob_%04zu.%s", i % 16, i, text ? "txt" : "bin");
    WriteFile(dir / name, bytes);
  }
}

// Reference medians (seconds) from micro_timings.json; negative when absent.
double Ref(const kf::Json& timings, const char* key) {
  auto it = timings.find(key);
  return it != timings.end() && it->is_object() ? (*it)["median_s"].get<double>() : -1.0;
}

void Row(const char* name, double seconds, double bytes, double baseline_s, double ref_s) {
  char ref[64] = "-";
  char vs_ref[64] = "-";
  if (ref_s > 0) {
    std::snprintf(ref, sizeof ref, "%.4f s", ref_s);
    if (ref_s >= seconds) std::snprintf(vs_ref, sizeof vs_ref, "%.1fx faster", ref_s / seconds);
    else std::snprintf(vs_ref, sizeof vs_ref, "%.1fx slower", seconds / ref_s);
  }
  std::printf("%-44s %10.5f s %9.1f MB/s %8.2fx base %12s %14s\n", name, seconds, bytes / seconds / 1e6,
              seconds / baseline_s, ref, vs_ref);
}

// memcpy + base64 of every file of `files` (the baseline).
double Baseline(const kf::MemoryFileMap& files, int reps) {
  std::string buffer;
  size_t sink = 0;
  double t = Median(reps, [&] {
    for (const std::string& path : files.ListFiles()) {
      const std::string* bytes = files.Find(path);
      buffer.resize(bytes->size());
      std::memcpy(buffer.data(), bytes->data(), bytes->size());
      sink += kf::Base64Encode(buffer).size();
    }
  });
  if (sink == 42) std::puts("");
  return t;
}

void BenchTask(const char* label, const fs::path& pkg, const fs::path& scratch, int reps, const kf::Json& timings,
               const char* ref_create, const char* ref_with_blocks, const char* ref_encode, const char* ref_decode) {
  kf::TaskCreateOptions options;
  options.collector = kf::PytestCollector();
  int cold_round = 0;
  kf::Task task;
  double cold = -1;
  try {
    cold = Median(std::max(1, reps / 3), [&] { task = kf::Task::Create(pkg, options).first; },
                  [&] { options.cache_dir = scratch / ("cold" + std::to_string(cold_round++)); });
  } catch (const kf::Error& e) {
    std::printf("%s: Task::Create failed (%s); create figures skipped\n", label, e.what());
    kf::TaskCreateOptions no_tests;
    no_tests.discover_tests = false;
    task = kf::Task::Create(pkg, no_tests).first;
  }
  const double bytes = static_cast<double>(task.task_data.TotalBytes());
  const double base = Baseline(task.task_data, reps);
  std::printf("\n%s: %zu files, %.1f MB; baseline memcpy+base64 %.5f s (%.0f MB/s)\n", label, task.task_data.size(),
              bytes / 1e6, base, bytes / base / 1e6);
  std::printf("%-44s %12s %14s %13s %12s %14s\n", "operation", "median", "throughput", "vs baseline", "reference",
              "vs reference");
  if (cold > 0) {
    Row("Task::Create cold (pytest collection)", cold, bytes, base, ref_create ? Ref(timings, ref_create) : -1);
    double cached = Median(reps, [&] { task = kf::Task::Create(pkg, options).first; });
    Row("Task::Create cached (no Python)", cached, bytes, base, -1);
  }
  kf::BlockUpdateShort update;
  update["EVOLVE"] = task.blocks.at("EVOLVE").begin()->second.at(0) + "# candidate\n";
  double wb = Median(reps * 4, [&] { (void)task.WithBlocks(update); });
  Row("WithBlocks (string EVOLVE)", wb, bytes, base, ref_with_blocks ? Ref(timings, ref_with_blocks) : -1);
  std::string text;
  double enc = Median(reps, [&] { text = kf::DumpJson(task.Encode()); });
  Row("Encode + JSON text", enc, bytes, base, ref_encode ? Ref(timings, ref_encode) : -1);
  double dec = Median(reps, [&] { (void)kf::Task::Decode(kf::ParseJson(text, "bench")); });
  Row("JSON parse + Decode", dec, bytes, base, ref_decode ? Ref(timings, ref_decode) : -1);
  Row("encode -> JSON -> decode (round trip)", enc + dec, bytes, base,
      ref_encode && ref_decode ? Ref(timings, ref_encode) + Ref(timings, ref_decode) : -1);
  std::printf("  encoded JSON: %.1f MB; breakdown:\n", static_cast<double>(text.size()) / 1e6);
  kf::MemoryFileMap files;
  Row("  MemoryFileMap::FromDisk", Median(reps, [&] { files = kf::MemoryFileMap::FromDisk(pkg); }), bytes, base,
      ref_with_blocks ? -1 : Ref(timings, "MemoryFileMap.from_disk(50MB dir)"));
  Row("  GetAllBlocks", Median(reps, [&] { (void)kf::GetAllBlocks(files); }), bytes, base, -1);
  Row("  CollectionCacheKey (SHA-256)", Median(reps, [&] { (void)kf::CollectionCacheKey(files, "salt"); }), bytes,
      base, -1);
  Row("  HashId", Median(reps, [&] { (void)task.HashId(); }), bytes, base, -1);
  kf::Json encoded;
  Row("  Task::Encode (to Json, no text)", Median(reps, [&] { encoded = task.Encode(); }), bytes, base, -1);
  Row("  DumpJson", Median(reps, [&] { text = kf::DumpJson(encoded); }), bytes, base, -1);
  Row("  ParseJson", Median(reps, [&] { encoded = kf::ParseJson(text, "bench"); }), bytes, base, -1);
  Row("  Task::Decode (from Json)", Median(reps, [&] { (void)kf::Task::Decode(encoded); }), bytes, base, -1);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 3 : 7;
  const fs::path shared = KF_SHARED_DIR;
  kf::Json timings = kf::Json::object();
  try {
    std::ifstream in(shared / "fixtures/golden/micro_timings.json");
    std::stringstream ss;
    ss << in.rdbuf();
    timings = kf::ParseJson(ss.str(), "micro_timings.json");
  } catch (const kf::Error& e) {
    std::printf("reference timings unavailable: %s\n", e.what());
  }
  char tmpl[] = "/tmp/kf_task_bench_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const fs::path scratch = tmpl;
  int rc = 0;
  try {
    std::printf("task_bench: ratios are median time / baseline time (lower is better); the reference ran on a\n"
                "2-core machine with Python 3.11 (micro_timings.json). Small-task reference figures are for\n"
                "relu_cpu; the 50 MB reference figures are MemoryFileMap-only (no tests/blocks).\n");
    BenchTask("relu_cpu fixture", shared / "fixtures/tasks/relu_cpu", scratch, reps, timings,
              "Task.create(relu_cpu)", "with_blocks(relu_cpu, string)", "encode+json.dumps(relu_cpu)",
              "json.loads+Task.decode(relu_cpu)");
    const fs::path big = scratch / "big_task";
    MakeBigTask(big);
    BenchTask("50 MB task (1,200 files)", big, scratch, reps, timings, nullptr, nullptr,
              "MemoryFileMap.encode+json.dumps(50MB)", "json.loads+MemoryFileMap.decode(50MB)");
  } catch (const std::exception& e) {
    std::printf("task_bench failed: %s\n", e.what());
    rc = 1;
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return rc;
}
