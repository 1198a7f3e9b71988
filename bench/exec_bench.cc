// exec_bench — spawn-to-exit overhead of kf::RunProcess on /bin/true (median of N runs, default 1000),
// beside Python's subprocess.run(['/bin/true']) measured inside /usr/bin/python3 (its median), as a ratio.
// Usage: exec_bench [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernelfoundry/process.hpp"

namespace {

double MedianMs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double TimeRuns(int n, bool force_subreaper, kf::ContainmentMethod* method) {
  kf::ProcessOptions o;
  o.argv = {"/bin/true"};
  o.force_subreaper = force_subreaper;
  std::vector<double> ms;
  ms.reserve(n);
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    kf::ProcessRun run = kf::RunProcess(o);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (run.result.returncode != 0) {
      std::fprintf(stderr, "unexpected returncode %d\n", run.result.returncode);
      std::exit(1);
    }
    *method = run.containment;
  }
  return MedianMs(ms);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1000;
  kf::ContainmentMethod method_default{}, method_sub{};
  const double kf_default = TimeRuns(n, false, &method_default);
  const double kf_subreaper = TimeRuns(n, true, &method_sub);

  const std::string script =
      "import subprocess, time, statistics\n"
      "ts = []\n"
      "for _ in range(" + std::to_string(n) + "):\n"
      "    t = time.perf_counter()\n"
      "    subprocess.run(['/bin/true'])\n"
      "    ts.append((time.perf_counter() - t) * 1000)\n"
      "print(statistics.median(ts))\n";
  kf::ProcessOptions py;
  py.argv = {"/usr/bin/python3", "-c", script};
  kf::ProcessRun run = kf::RunProcess(py);
  if (run.result.returncode != 0) {
    std::fprintf(stderr, "python baseline failed: %s\n", run.result.stderr_text.c_str());
    return 1;
  }
  const double python = std::atof(run.result.stdout_text.c_str());

  std::printf("spawn-to-exit of /bin/true, median of %d runs\n", n);
  std::printf("  python subprocess.run (baseline)      %8.3f ms\n", python);
  std::printf("  kf::RunProcess (%-10s)            %8.3f ms   ratio %.2fx\n",
              kf::ContainmentMethodName(method_default), kf_default, kf_default / python);
  std::printf("  kf::RunProcess (%-10s)            %8.3f ms   ratio %.2fx\n",
              kf::ContainmentMethodName(method_sub), kf_subreaper, kf_subreaper / python);
  return 0;
}
