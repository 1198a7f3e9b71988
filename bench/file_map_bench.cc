// MemoryFileMap throughput on a 50 MB / 1,200-file tree (the reference's "big dir"), and on relu_cpu.
//
// For each operation: our median time (ms), MB/s over the content bytes, the ratio to an in-run baseline
// (base64-encoding + memcpy of the same bytes: the least any encode/copy path must do), and the reference's
// median from shared/fixtures/golden/micro_timings.json with reference_ms / our_ms (> 1: we are faster).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/files.hpp"
#include "kernelfoundry/base64.hpp"
#include "kernelfoundry/json.hpp"
#include "kernelfoundry/memory_file_map.hpp"
#include "bench_paths.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

/// CPU time of the last MedianMs run set (median, ms): on a shared machine wall time includes waiting.
double g_cpu_ms = 0;

/// Median wall time of `fn` over `n` runs, in milliseconds (also sets g_cpu_ms).
double MedianMs(int n, const std::function<void()>& fn) {
  std::vector<double> t, cpu;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    const std::clock_t c0 = std::clock();
    fn();
    cpu.push_back(1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  std::sort(cpu.begin(), cpu.end());
  g_cpu_ms = cpu[cpu.size() / 2];
  return t[t.size() / 2];
}

/// Source-like text: random words from a small vocabulary, lines of varying length (compresses ~3-4x).
std::string MakeContent(std::mt19937_64& rng, size_t bytes) {
  static const char* kWords[] = {"float", "int", "for", "return", "kernel", "x", "y", "idx", "+=", "*", "{", "}",
                                 "(", ")", ";", "const", "auto", "tensor", "block", "thread", "0", "1", "size",
                                 "if", "else", "while", "sum", "acc", "ptr", "n"};
  std::string out;
  out.reserve(bytes + 64);
  std::uniform_int_distribution<int> word(0, 29), len(2, 14);
  while (out.size() < bytes) {
    const int k = len(rng);
    for (int i = 0; i < k; ++i) {
      out += kWords[word(rng)];
      out += ' ';
    }
    out += std::to_string(rng() % 100000);
    out += '\n';
  }
  out.resize(bytes);
  return out;
}

struct RefTimings {
  kf::Json json;
  double Ms(const std::string& key) const {
    if (!json.contains(key)) return -1;
    return json[key]["median_s"].get<double>() * 1000.0;
  }
};

void Row(const char* name, double ms, uint64_t bytes, double baseline_ms, double ref_ms) {
  const double mbps = static_cast<double>(bytes) / 1e6 / (ms / 1000.0);
  std::printf("%-24s %9.2f ms (cpu %9.2f) %8.1f MB/s  x%6.2f baseline", name, ms, g_cpu_ms, mbps,
              ms / baseline_ms);
  if (ref_ms > 0) {
    std::printf("  | reference %9.2f ms  speedup %6.2fx", ref_ms, ref_ms / ms);
  }
  std::printf("\n");
}

}  // namespace

int main() {
  RefTimings ref;
  {
    ref.json = kf::ParseJson(
        kf::ReadFileBytes(kf::bench::SharedDir() / "fixtures" / "golden" / "micro_timings.json").value_or(""),
        "micro_timings.json");
  }
  const size_t files = ref.json.value("big_dir_files", 1200);
  const uint64_t target = ref.json.value("big_dir_bytes", uint64_t{52660690});

  char tmpl[] = "/tmp/kf_file_map_bench_XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const fs::path root = tmpl, src = root / "src";
  std::mt19937_64 rng(42);
  {  // the tree: 1,200 files in 30 directories
    std::vector<uint64_t> weight(files);
    uint64_t weight_sum = 0;
    for (auto& w : weight) weight_sum += (w = 500 + rng() % 1000);  // sizes spread 0.5x..1.5x the mean
    uint64_t written = 0;
    for (size_t i = 0; i < files; ++i) {
      const uint64_t size = (i + 1 == files) ? target - written : target * weight[i] / weight_sum;
      const fs::path p = src / ("dir" + std::to_string(i % 30)) / ("file" + std::to_string(i) + ".cpp");
      fs::create_directories(p.parent_path());
      std::ofstream(p, std::ios::binary) << MakeContent(rng, size);
      written += size;
    }
  }

  kf::MemoryFileMap map = kf::MemoryFileMap::FromDisk(src);
  const uint64_t bytes = map.TotalBytes();
  std::printf("tree: %zu files, %.1f MB (reference big dir: %zu files, %.1f MB)\n\n", map.size(), bytes / 1e6,
              files, target / 1e6);

  // Baseline: base64 of every file plus a memcpy of every file.
  std::vector<char> sink(static_cast<size_t>(bytes));
  const double baseline = MedianMs(5, [&] {
    size_t at = 0, chars = 0;
    for (const auto& k : map.ListFiles()) {
      const std::string* b = map.Find(k);
      chars += kf::Base64Encode(*b).size();
      std::memcpy(sink.data() + at, b->data(), b->size());
      at += b->size();
    }
    if (chars == 0) std::abort();
  });
  Row("baseline base64+memcpy", baseline, bytes, baseline, -1);
  Row("FromDisk", MedianMs(5, [&] { map = kf::MemoryFileMap::FromDisk(src); }), bytes, baseline,
      ref.Ms("MemoryFileMap.from_disk(50MB dir)"));

  std::string text;
  const double encode = MedianMs(3, [&] { text = kf::DumpJson(map.Encode()); });
  Row("Encode+DumpJson", encode, bytes, baseline, ref.Ms("MemoryFileMap.encode+json.dumps(50MB)"));
  std::printf("  encoded JSON: %.1f MB (reference %.1f MB)\n", text.size() / 1e6,
              ref.json.value("encoded_json_bytes(50MB)", uint64_t{0}) / 1e6);
  kf::MemoryFileMap back;
  const double decode = MedianMs(3, [&] { back = kf::MemoryFileMap::FromJson(kf::ParseJson(text, "bench")); });
  Row("ParseJson+Decode", decode, bytes, baseline, ref.Ms("json.loads+MemoryFileMap.decode(50MB)"));
  if (!(back == map)) std::printf("  ERROR: decode(encode(map)) != map\n");

  int out_n = 0;
  const double to_disk = MedianMs(3, [&] { map.ToDisk(root / ("out" + std::to_string(out_n++))); });
  Row("ToDisk", to_disk, bytes, baseline, ref.Ms("MemoryFileMap.to_disk(50MB)"));
  std::string archive;
  const double tgz = MedianMs(3, [&] { archive = map.ToArchive(kf::ArchiveFormat::kTarGz); });
  Row("ToArchive(tar.gz)", tgz, bytes, baseline, ref.Ms("MemoryFileMap.to_tarball(w:gz, 50MB)"));
  std::printf("  tar.gz: %.1f MB\n", archive.size() / 1e6);
  const double tar = MedianMs(3, [&] { archive = map.ToArchive(kf::ArchiveFormat::kTar); });
  Row("ToArchive(tar)", tar, bytes, baseline, ref.Ms("MemoryFileMap.to_tarball(w, 50MB)"));
  const double from_tar = MedianMs(3, [&] { back = kf::MemoryFileMap::FromArchive(archive, "bench.tar"); });
  Row("FromArchive(tar)", from_tar, bytes, baseline, -1);

  // relu_cpu: the small-package numbers the reference also measured.
  const kf::MemoryFileMap relu = kf::MemoryFileMap::FromDisk(kf::bench::SharedDir() / "fixtures/tasks/relu_cpu");
  const uint64_t relu_bytes = relu.TotalBytes();
  std::printf("\nrelu_cpu: %zu files, %llu bytes\n", relu.size(), static_cast<unsigned long long>(relu_bytes));
  const double relu_base = MedianMs(101, [&] {
    size_t chars = 0;
    for (const auto& k : relu.ListFiles()) chars += kf::Base64Encode(*relu.Find(k)).size();
    if (chars == 0) std::abort();
  });
  std::string relu_text;
  Row("relu Encode+DumpJson", MedianMs(101, [&] { relu_text = kf::DumpJson(relu.Encode()); }), relu_bytes,
      relu_base, ref.Ms("encode+json.dumps(relu_cpu)"));
  Row("relu ParseJson+Decode",
      MedianMs(101, [&] { back = kf::MemoryFileMap::FromJson(kf::ParseJson(relu_text, "bench")); }), relu_bytes,
      relu_base, ref.Ms("json.loads+Task.decode(relu_cpu)"));
  Row("relu ToDisk", MedianMs(21, [&] { relu.ToDisk(root / ("relu" + std::to_string(out_n++))); }), relu_bytes,
      relu_base, ref.Ms("MemoryFileMap.to_disk(relu_cpu)"));

  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
