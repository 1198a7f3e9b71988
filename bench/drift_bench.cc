// drift_bench — how far does this machine's speed ratio of two kernels drift on its own, with no kf at all?
//
// The floor under every speedup interval: kf pairs the candidate's and the reference's calls round by round, so
// a slowdown that hits both sides alike cancels, but a change of the machine's state that helps one side more
// than the other (a shared last-level cache or memory bus that other tenants of the host use more or less) moves
// the ratio itself. This bench times two memory-bound kernels shaped like the README example (1024 x 4096 float32,
// y = max(x + b, 0) * s) in one process (one thread by default), alternating call by call, with preallocated buffers
// and four rotating inputs — nothing of kf's harness, allocator or processes:
//   - "3-pass": the reference's shape, three passes over memory through two temporaries;
//   - "1-pass": the candidate's shape, one fused pass.
// It prints the median ratio of every second, the standard deviation of log ratios of 1 s and of the means
// of 5, 10 and 20 s blocks (20 s = kf's default budget_s), and the same for a control pair (1-pass against
// itself), which measures what pairing cancels. If the 20 s blocks of 3-pass/1-pass spread by X %, then one
// 20 s evaluation of such a pair can be honest about its own 20 seconds and still miss the next run's ratio by
// ~X %: no interval of one run can be both decisive at ±2 % and cover other runs where X is that large.
//
// Options move the bench step by step towards kf's timed processes, to find which step adds noise: --threads N
// splits the rows over N OpenMP threads (kf's default: every usable CPU),
// --allocate takes every call's output and temporaries from malloc and frees them after the call (as torch's
// ops do; run it under kf's allocator with LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
// MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1).
//
// --processes K splits the seconds over K fresh processes run one after another (as kf's timed processes), each
// with buffers of its own, and compares the spread of the processes' median ratios with what their rounds' own
// noise explains (1.2533 x sd / sqrt(rounds), the standard error of a median): an excess is a per-process offset.
//
// With --processes: --pin C|alternate runs every process on CPU C (or alternates CPUs 0 and 1); --copy 1 copies
// the next input value set into one input buffer before every call (kf's value rotation), --copy 2 does it with
// non-temporal stores; --replace N gives each process N placements one after another, each on buffers allocated
// while the previous ones are still held (new pages), and pools their rounds: if the per-process offset comes
// from where the buffers lie in physical memory, N placements shrink it by ~sqrt(N).
//
// Usage: drift_bench [--seconds S] [--threads N] [--allocate] [--processes K] [--pin C|alternate] [--copy 0|1|2]
//                    [--replace N]
//        (S default 120, at least 40; N default 1; K default 1 = one process, per-second report)
#include <immintrin.h>
#include <omp.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kRows = 1024, kCols = 4096, kN = kRows * kCols;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Buffers {
  std::vector<std::vector<float>> inputs;
  std::vector<float> bias, t1_kept, t2_kept, out_kept;
  float *t1 = nullptr, *t2 = nullptr, *out = nullptr;
  bool allocate = false;  // --allocate: fresh malloc'ed t1, t2, out for every call
  int copy = 0;           // --copy 1: the next value set copied into one input buffer before every call (as kf's
                          // value rotation); --copy 2: the same with non-temporal stores
  float* input = nullptr;  // 64-byte aligned (non-temporal stores need 32)
  int replace = 1;          // --replace N: placements per process

  void Begin(bool three_pass) {
    if (!allocate) {
      t1 = t1_kept.data(), t2 = t2_kept.data(), out = out_kept.data();
      return;
    }
    out = static_cast<float*>(std::malloc(kN * sizeof(float)));
    if (three_pass) {
      t1 = static_cast<float*>(std::malloc(kN * sizeof(float)));
      t2 = static_cast<float*>(std::malloc(kN * sizeof(float)));
    }
  }
  void End(bool three_pass) {
    if (!allocate) return;
    out_kept[kN / 3] = out[kN / 3];  // the checksum's element, so the work is not dead
    std::free(out);
    if (three_pass) {
      std::free(t1);
      std::free(t2);
    }
  }
};

// The reference's shape: three passes, two temporaries. Returns milliseconds.
double ThreePass(Buffers& b, const float* x) {
  const double start = Now();
  b.Begin(true);
  float* __restrict__ t1 = b.t1;
  float* __restrict__ t2 = b.t2;
  float* __restrict__ out = b.out;
  const float* __restrict__ bias = b.bias.data();
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t c = 0; c < kCols; ++c) t1[r * kCols + c] = x[r * kCols + c] + bias[c];
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < kN; ++i) t2[i] = std::max(t1[i], 0.0f);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < kN; ++i) out[i] = t2[i] * 0.5f;
  b.End(true);
  return (Now() - start) * 1e3;
}

// The candidate's shape: one fused pass. Returns milliseconds.
double OnePass(Buffers& b, const float* x) {
  const double start = Now();
  b.Begin(false);
  float* __restrict__ out = b.out;
  const float* __restrict__ bias = b.bias.data();
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t c = 0; c < kCols; ++c) out[r * kCols + c] = std::max(x[r * kCols + c] + bias[c], 0.0f) * 0.5f;
  }
  b.End(false);
  return (Now() - start) * 1e3;
}

double StdDev(const std::vector<double>& v) {
  double mean = 0, ss = 0;
  for (double x : v) mean += x / static_cast<double>(v.size());
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

// Lag-1 autocorrelation of v (how much one second's ratio predicts the next).
double Lag1(const std::vector<double>& v) {
  double mean = 0;
  for (double x : v) mean += x / static_cast<double>(v.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    den += (v[i] - mean) * (v[i] - mean);
    if (i + 1 < v.size()) num += (v[i] - mean) * (v[i + 1] - mean);
  }
  return den > 0 ? num / den : 0;
}

// One pair's per-second log ratios summarised: spread of 1 s values and of 5, 10, 20 s block means.
void Report(const char* name, const std::vector<double>& ratios) {
  std::vector<double> logs;
  for (double r : ratios) logs.push_back(std::log(r));
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  std::printf("%-16s 1 s: n=%3zu  median %.3f  range %.3f-%.3f  sd %.2f %%  lag-1 autocorrelation %.2f\n", name,
              ratios.size(), Median(ratios), *lo, *hi, 100 * StdDev(logs), Lag1(logs));
  for (size_t block : {5, 10, 20}) {
    std::vector<double> means;
    for (size_t i = 0; i + block <= logs.size(); i += block) {
      double m = 0;
      for (size_t j = i; j < i + block; ++j) m += logs[j] / static_cast<double>(block);
      means.push_back(m);
    }
    if (means.size() < 2) continue;
    const auto [blo, bhi] = std::minmax_element(means.begin(), means.end());
    std::printf("%-16s %2zu s blocks: n=%2zu  range %.3f-%.3f  sd %.2f %%\n", "", block, means.size(), std::exp(*blo),
                std::exp(*bhi), 100 * StdDev(means));
  }
}


// Fills b's inputs, bias and kept buffers (in the calling process: fresh pages for a fresh process).
void Setup(Buffers& b) {
  b.inputs.assign(4, std::vector<float>(kN));
  for (size_t k = 0; k < b.inputs.size(); ++k) {
    for (size_t i = 0; i < kN; ++i) b.inputs[k][i] = static_cast<float>(static_cast<int>((i * 31 + k) % 97) - 48);
  }
  b.input = static_cast<float*>(std::aligned_alloc(64, kN * sizeof(float)));  // a placement's own; kept to exit
  std::memset(b.input, 0, kN * sizeof(float));
  b.bias.resize(kCols);
  for (size_t c = 0; c < kCols; ++c) b.bias[c] = static_cast<float>(c % 7) - 3.0f;
  b.t1_kept.assign(kN, 0.0f);
  b.t2_kept.assign(kN, 0.0f);
  b.out_kept.assign(kN, 0.0f);
}

// Every round's ratios and times of one loop of `seconds`.
struct Rounds {
  std::vector<double> main, control, three_ms, one_ms, at_s;  // at_s: seconds since the loop started
};

// Alternates the two shapes (random order per round, seeded by `seed`) plus the control's second call for
// `seconds`.
Rounds Loop(Buffers& b, double seconds, uint64_t seed) {
  Rounds out;
  uint64_t rng = seed, call = 0;
  auto next_input = [&]() -> const float* {
    const float* src = b.inputs[call++ % b.inputs.size()].data();
    if (b.copy == 0) return src;
    float* dst = b.input;
    if (b.copy == 1) {
      std::memcpy(dst, src, kN * sizeof(float));
    } else {
      for (size_t i = 0; i < kN; i += 8) {
        _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
      }
      _mm_sfence();
    }
    return dst;
  };
  const double start = Now();
  while (Now() - start < seconds) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    double three = 0, one = 0;
    if ((rng >> 63) != 0) {
      three = ThreePass(b, next_input());
      one = OnePass(b, next_input());
    } else {
      one = OnePass(b, next_input());
      three = ThreePass(b, next_input());
    }
    const double one_again = OnePass(b, next_input());  // the control's second side
    out.main.push_back(three / one);
    out.control.push_back(one_again / one);
    out.three_ms.push_back(three);
    out.one_ms.push_back(one);
    out.at_s.push_back(Now() - start);
  }
  return out;
}

// One process: the per-second medians and their spread over 1 s and 5/10/20 s blocks.
void OneProcess(Buffers& b, int seconds) {
  Setup(b);
  const Rounds r = Loop(b, seconds, 20261205);
  std::vector<double> main_ratios, control_ratios, three_ms, one_ms;
  for (size_t i = 0, begin = 0; i <= r.at_s.size(); ++i) {
    if (i < r.at_s.size() && r.at_s[i] < static_cast<double>(main_ratios.size() + 1)) continue;
    if (i == begin) break;
    auto median_of = [&](const std::vector<double>& v) {
      return Median(std::vector<double>(v.begin() + static_cast<long>(begin), v.begin() + static_cast<long>(i)));
    };
    main_ratios.push_back(median_of(r.main));
    control_ratios.push_back(median_of(r.control));
    three_ms.push_back(median_of(r.three_ms));
    one_ms.push_back(median_of(r.one_ms));
    begin = i;
  }
  std::printf("per second, 3-pass/1-pass:");
  for (double x : main_ratios) std::printf(" %.3f", x);
  const auto [t_lo, t_hi] = std::minmax_element(three_ms.begin(), three_ms.end());
  const auto [o_lo, o_hi] = std::minmax_element(one_ms.begin(), one_ms.end());
  std::printf("\nper-second medians: 3-pass %.3f-%.3f ms, 1-pass %.3f-%.3f ms\n", *t_lo, *t_hi, *o_lo, *o_hi);
  Report("3-pass/1-pass", main_ratios);
  Report("1-pass/1-pass", control_ratios);
  std::printf("checksum %g\n", static_cast<double>(b.out_kept[kN / 3]));
}

// K fresh processes one after another: each process's median ratio (main and control) against the spread its
// rounds' noise explains.
int ManyProcesses(Buffers& b, int seconds, int processes, int pin) {
  std::vector<double> main_medians, control_medians, main_se, control_se;
  for (int k = 0; k < processes; ++k) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      close(fds[0]);
      if (pin != -1) {  // --pin C: every process on CPU C; --pin alternate (-2): process k on CPU k % 2
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(pin == -2 ? k % 2 : pin, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) _exit(1);
      }
      // --replace N: N placements per process, each on buffers allocated while the previous ones are still held
      // (so their pages are new), the rounds pooled.
      std::vector<Buffers> placements(static_cast<size_t>(b.replace), b);
      Rounds r;
      for (int p = 0; p < b.replace; ++p) {
        Setup(placements[static_cast<size_t>(p)]);
        Loop(placements[static_cast<size_t>(p)], 0.05, 1);  // first touch and warm-up, not counted
        const Rounds part = Loop(placements[static_cast<size_t>(p)], static_cast<double>(seconds) / processes / b.replace,
                                 20261205 + static_cast<uint64_t>(k * 100 + p));
        r.main.insert(r.main.end(), part.main.begin(), part.main.end());
        r.control.insert(r.control.end(), part.control.begin(), part.control.end());
      }
      auto summary = [](const std::vector<double>& ratios, double out[2]) {
        std::vector<double> logs;
        for (double x : ratios) logs.push_back(std::log(x));
        out[0] = std::exp(Median(logs));
        out[1] = 1.2533 * StdDev(logs) / std::sqrt(static_cast<double>(logs.size()));
      };
      double values[5];
      summary(r.main, values);
      summary(r.control, values + 2);
      values[4] = static_cast<double>(r.main.size());
      const bool ok = write(fds[1], values, sizeof values) == static_cast<ssize_t>(sizeof values);
      _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    double values[5] = {};
    const bool ok = read(fds[0], values, sizeof values) == static_cast<ssize_t>(sizeof values);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "drift_bench: process %d failed\n", k);
      return 1;
    }
    main_medians.push_back(values[0]);
    main_se.push_back(values[1]);
    control_medians.push_back(values[2]);
    control_se.push_back(values[3]);
    std::printf("process %2d: %4.0f rounds  3-pass/1-pass %.3f (se %.2f %%)  control %.3f (se %.2f %%)\n", k,
                values[4], values[0], 100 * values[1], values[2], 100 * values[3]);
  }
  auto line = [](const char* name, const std::vector<double>& medians, const std::vector<double>& se) {
    std::vector<double> logs;
    for (double x : medians) logs.push_back(std::log(x));
    double se2 = 0;
    for (double x : se) se2 += x * x / static_cast<double>(se.size());
    const auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
    std::printf("%-16s process medians %.3f-%.3f: sd %.2f %%, explained by the rounds' noise %.2f %%\n", name, *lo,
                *hi, 100 * StdDev(logs), 100 * std::sqrt(se2));
  };
  line("3-pass/1-pass", main_medians, main_se);
  line("1-pass/1-pass", control_medians, control_se);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 120, threads = 1, processes = 1, pin = -1;
  Buffers b;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--processes" && i + 1 < argc) {
      processes = std::atoi(argv[++i]);
    } else if (a == "--pin" && i + 1 < argc) {
      const std::string v = argv[++i];
      pin = v == "alternate" ? -2 : std::atoi(v.c_str());
    } else if (a == "--copy" && i + 1 < argc) {
      b.copy = std::atoi(argv[++i]);
    } else if (a == "--replace" && i + 1 < argc) {
      b.replace = std::atoi(argv[++i]);
    } else if (a == "--allocate") {
      b.allocate = true;
    } else {
      std::fprintf(stderr, "usage: drift_bench [--seconds S] [--threads N] [--allocate] [--processes K] [--pin "
                           "C|alternate] [--copy 0|1|2] [--replace N] (S >= 40, N >= 1, 1 <= K <= S)\n");
      return 2;
    }
  }
  if (b.copy < 0 || b.copy > 2 || b.replace < 1 || b.replace > 16 || pin < -2) {
    std::fprintf(stderr, "drift_bench: expected --copy 0, 1 or 2, --replace from 1 to 16 and --pin C >= 0 or "
                         "alternate\n");
    return 2;
  }
  if (seconds < 40 || threads < 1 || processes < 1 || processes > seconds) {
    std::fprintf(stderr, "drift_bench: expected --seconds >= 40, --threads >= 1 and 1 <= --processes <= seconds, "
                         "got %d, %d and %d\n", seconds, threads, processes);
    return 2;
  }
  omp_set_num_threads(threads);
  std::printf("drift_bench: %d s in %d process(es), 1024 x 4096 float32, %d thread(s), %s buffers, calls "
              "alternating in a random order\n", seconds, processes, threads,
              b.allocate ? "malloc'ed per call" : "preallocated");
  std::fflush(stdout);
  if (processes > 1) return ManyProcesses(b, seconds, processes, pin);
  OneProcess(b, seconds);
  return 0;
}
