// The paired timing record and its one verdict policy (kernelfoundry/paired_record.hpp): the wire form both
// ways, the rules of JudgePaired with the numbers at their edges, the options read from eval_config.timing, and
// the quiet wait every side uses (kernelfoundry/paired.hpp WaitQuiet).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <ctime>
#include <thread>

#include "kernelfoundry/error.hpp"
#include "kernelfoundry/paired_wire.hpp"

namespace kf {
namespace {

// A measured record: 20 rounds at `speedup` with an interval of ±`half` (relative), 100 ms of timed windows.
PairedRecord Measured(double speedup, double half = 0.01, int64_t rounds = 20) {
  PairedRecord r;
  r.speedup = {speedup, speedup * (1 - half), speedup * (1 + half)};
  r.rel_half_width = half;
  r.rounds = rounds;
  r.elapsed_s = r.elapsed_raw_s = 2.0;
  r.candidate_window_s = r.reference_window_s = 0.1;
  r.candidate_ms.assign(static_cast<size_t>(rounds), 1.0);
  r.reference_ms.assign(static_cast<size_t>(rounds), speedup);
  return r;
}

TEST(PairedRecord, WireFormRoundTrips) {
  PairedRecord r = Measured(2.5);
  r.status = PairedStatus::kNoisy;
  r.detail = "why";
  r.stop = "budget";
  r.value_sets = 4;
  r.candidate_after_cpu_s = 0.002;
  r.elapsed_raw_s = 2.01;
  r.remeasured = PairedRemeasured{2.4, {2.4, 2.3, 2.5}, 18};
  r.processes = 3;
  r.process_rounds = {7, 7, 6};
  r.process_speedups = {{2.4, 2.3, 2.5}, {2.5, 2.4, 2.6}, {2.6, 2.5, 2.7}};
  r.more.push_back(Measured(1.1));
  const Json j = ToJson(r);
  EXPECT_EQ(j["status"], "noisy");
  EXPECT_EQ(j["ci"], Json::array({2.475, 2.525}));
  EXPECT_DOUBLE_EQ(j["after_return_cpu_ms"]["candidate"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["window_ms"]["reference"].get<double>(), 100.0);
  EXPECT_EQ(j["process_cis"][2], Json::array({2.5, 2.7}));
  EXPECT_EQ(j["more"].size(), 1u);
  EXPECT_FALSE(j.contains("process"));
  const PairedRecord back = PairedRecordFromJson(j);
  EXPECT_EQ(ToJson(back), j);
  EXPECT_EQ(back.status, PairedStatus::kNoisy);
  EXPECT_DOUBLE_EQ(back.candidate_after_cpu_s, 0.002);
  EXPECT_EQ(back.process_rounds, (std::vector<int64_t>{7, 7, 6}));

  // Unpaired: only what it has. Absent fields keep defaults; the raw clock defaults to the steady one.
  const Json alone = Json{{"paired", false}, {"status", "error"}, {"detail", "TypeError: x"}};
  EXPECT_EQ(ToJson(PairedRecordFromJson(alone)), alone);
  const PairedRecord old = PairedRecordFromJson(Json{{"paired", true}, {"status", "correct"}, {"elapsed_s", 3.0}});
  EXPECT_DOUBLE_EQ(old.elapsed_raw_s, 3.0);
}

TEST(PairedRecord, MalformedRecordsNameTheField) {
  auto field = [](const Json& j) {
    try {
      PairedRecordFromJson(j);
    } catch (const Error& e) {
      return e.field();
    }
    return std::string("no error");
  };
  EXPECT_EQ(field(Json{{"status", "great"}}), "status");
  EXPECT_EQ(field(Json{{"status", "correct"}, {"ci", {1.0}}}), "ci");
  EXPECT_EQ(field(Json{{"status", "correct"}, {"reference_ms", {1.0, "x"}}}), "reference_ms");
  EXPECT_EQ(field(Json{{"status", "correct"}, {"rounds", 1.5}}), "rounds");
  EXPECT_EQ(field(Json{{"status", "correct"}, {"after_return_cpu_ms", {{"candidate", "1"}}}}),
            "after_return_cpu_ms.candidate");
  EXPECT_EQ(field(Json::array()), "");
  try {
    PairedTiming::FromJson(Json{{"paired", {{"t::bench", {{"status", "correct"}, {"speedup", "fast"}}}}}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "paired.t::bench.speedup");
  }
}

TEST(PairedTiming, KeepsTheBenchmarksInOrderWithTheirConditions) {
  PairedTiming t;
  t.records.emplace_back("b_second", Measured(1.0));
  t.records.emplace_back("a_first", Measured(2.0));
  t.conditions = Json{{"threads", 2}};
  const Json j = t.ToJson();
  EXPECT_EQ(j["paired"].begin().key(), "b_second");
  const PairedTiming back = PairedTiming::FromJson(j);
  ASSERT_NE(back.Find("a_first"), nullptr);
  EXPECT_DOUBLE_EQ(back.Find("a_first")->speedup.median, 2.0);
  EXPECT_EQ(back.Find("c"), nullptr);
  EXPECT_EQ(back.conditions["threads"], 2);
}

TEST(PairedOptionsFromJson, ReadsTheLoopAndVerdictKnobsAndIgnoresTheRest) {
  const PairedOptions o = PairedOptionsFromJson(Json{{"budget_s", 3}, {"min_rounds", 8}, {"seed", 7},
                                                     {"after_return_cpu_ratio", 0.5}, {"value_sets", 4}});
  EXPECT_DOUBLE_EQ(o.budget_s, 3.0);
  EXPECT_EQ(o.min_rounds, 8);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_DOUBLE_EQ(o.after_return_cpu_ratio, 0.5);
  EXPECT_DOUBLE_EQ(o.suspicious_speedup, 10.0);
  EXPECT_THROW(PairedOptionsFromJson(Json{{"min_rounds", 2.5}}), Error);
  EXPECT_THROW(PairedOptionsFromJson(Json{{"budget_s", "long"}}), Error);
  EXPECT_THROW(PairedOptionsFromJson(Json{{"seed", -1}}), Error);
  EXPECT_THROW(PairedOptionsFromJson(Json{{"after_return_cpu_ratio", -0.1}}), Error);
  EXPECT_THROW(PairedOptionsFromJson(Json::array()), Error);
  // Regressions (stranger test, 2026-12-04): a huge whole number was "not a whole number", max_rounds: 0 was
  // reported under min_rounds.
  auto message = [](const Json& options) -> std::string {
    try {
      PairedOptionsFromJson(options).Validate();
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  for (const char* text : {"99999999999999999999", "9223372036854775808", "1e300"}) {
    const std::string m = message(Json{{"warmup_window", Json::parse(text)}});
    EXPECT_NE(m.find("warmup_window"), std::string::npos) << m;
    EXPECT_NE(m.find("below 2^63"), std::string::npos) << m;
  }
  const std::string max0 = message(Json{{"max_rounds", 0}});
  EXPECT_NE(max0.find("max_rounds"), std::string::npos) << max0;
  EXPECT_NE(max0.find("max_rounds >= min_rounds, got max_rounds 0 and min_rounds 12"), std::string::npos) << max0;
  EXPECT_NE(message(Json{{"min_rounds", 0}}).find("min_rounds: expected a whole number >= 1"), std::string::npos)
      << message(Json{{"min_rounds", 0}});
}

TEST(RecordOf, AProblemOfACheckIsTheStatus) {
  PairedResult res;
  res.speedup = {1.5, 1.4, 1.6};
  res.rounds = 5;
  res.problem = "input_mutated: input 0 was written by the candidate during a timed call";
  PairedRecord r = RecordOf(res);
  EXPECT_EQ(r.status, PairedStatus::kInputMutated);
  EXPECT_EQ(r.detail, "input 0 was written by the candidate during a timed call");
  // The verdict of a caught problem stays what the check said.
  EXPECT_EQ(JudgePaired(r, PairedOptions{}).status, PairedStatus::kInputMutated);
  res.problem = "output differs";
  r = RecordOf(res);
  EXPECT_EQ(r.status, PairedStatus::kError);
  EXPECT_EQ(r.detail, "output differs");
  res.problem = "noisy: not a problem a check may report";
  EXPECT_EQ(RecordOf(res).status, PairedStatus::kError);
}

TEST(JudgePaired, AfterReturnCpuHonoursTheConfiguredRatio) {
  PairedOptions o;
  PairedRecord r = Measured(1.2);
  r.candidate_after_cpu_s = 0.030;  // 30 ms beyond the reference's 5, windows 100 ms
  r.reference_after_cpu_s = 0.005;
  EXPECT_EQ(JudgePaired(r, o).status, PairedStatus::kCorrect);  // 25 ms ≤ 0.25 × 100 ms
  r.candidate_after_cpu_s = 0.0301;
  const PairedRecord caught = JudgePaired(r, o);
  EXPECT_EQ(caught.status, PairedStatus::kSuspicious);
  EXPECT_NE(caught.detail.find("work continued after the call returned"), std::string::npos) << caught.detail;
  o.after_return_cpu_ratio = 0.5;  // the SDK hard-coded 0.25 before; eval_config.timing decides
  EXPECT_EQ(JudgePaired(r, o).status, PairedStatus::kCorrect);
  // The 5 ms floor: tiny windows do not make a little scheduler noise suspicious.
  PairedRecord tiny = Measured(1.2);
  tiny.candidate_window_s = 0.001;
  tiny.candidate_after_cpu_s = 0.0049;
  EXPECT_EQ(JudgePaired(tiny, PairedOptions{}).status, PairedStatus::kCorrect);
}

TEST(JudgePaired, AClockThatDisagreesWithTheRawClockIsSuspicious) {
  PairedRecord r = Measured(1.2);
  r.elapsed_s = 2.0;
  r.elapsed_raw_s = 2.0 + 0.15;  // the tolerance is 5 % + 50 ms = 0.15 s
  EXPECT_EQ(JudgePaired(r, PairedOptions{}).status, PairedStatus::kCorrect);
  r.elapsed_raw_s = 2.0 + 0.151;
  const PairedRecord caught = JudgePaired(r, PairedOptions{});
  EXPECT_EQ(caught.status, PairedStatus::kSuspicious);
  EXPECT_EQ(caught.detail, "the timing clock disagrees with the raw system clock (2.000 s vs 2.151 s)");
}

TEST(JudgePaired, ALargeSpeedupIsMeasuredAgainAndMustHold) {
  const PairedOptions o;
  int calls = 0;
  auto again_at = [&](double speedup, PairedStatus status = PairedStatus::kCorrect) -> PairedRemeasure {
    return [&calls, speedup, status] {
      ++calls;
      PairedRecord a = Measured(speedup);
      a.status = status;
      a.detail = status == PairedStatus::kCorrect ? "" : "outputs differ";
      return a;
    };
  };
  EXPECT_EQ(JudgePaired(Measured(9.9), o, again_at(1.0)).status, PairedStatus::kCorrect);
  EXPECT_EQ(calls, 0);  // at or below suspicious_speedup: no second measurement
  const PairedRecord held = JudgePaired(Measured(20.0), o, again_at(15.1));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(held.status, PairedStatus::kCorrect);
  ASSERT_TRUE(held.remeasured);
  EXPECT_DOUBLE_EQ(held.remeasured->speedup, 15.1);
  const PairedRecord fell = JudgePaired(Measured(20.0), o, again_at(14.9));
  EXPECT_EQ(fell.status, PairedStatus::kSuspicious);
  EXPECT_EQ(fell.detail, "a speedup of 20.00x did not hold when measured again with new inputs (14.90x)");
  EXPECT_EQ(JudgePaired(Measured(20.0), o, again_at(26.5)).status, PairedStatus::kCorrect);  // 1.325
  EXPECT_EQ(JudgePaired(Measured(20.0), o, again_at(26.7)).status, PairedStatus::kSuspicious);  // 1.335
  const PairedRecord changed = JudgePaired(Measured(20.0), o, again_at(20.0, PairedStatus::kOutputChangedUnderTiming));
  EXPECT_EQ(changed.status, PairedStatus::kOutputChangedUnderTiming);
  EXPECT_EQ(changed.detail, "outputs differ");
  EXPECT_EQ(JudgePaired(Measured(20.0), o).status, PairedStatus::kSuspicious);  // no way to measure again
  // A held speedup still has to reach the target to be correct.
  EXPECT_EQ(JudgePaired(Measured(20.0, 0.05), o, again_at(20.0)).status, PairedStatus::kNoisy);
}

TEST(JudgePaired, NoisyWhenTheIntervalMissesTheTargetAndNotesAreKept) {
  PairedOptions o;
  const PairedRecord noisy = JudgePaired(Measured(1.3, 0.021), o);
  EXPECT_EQ(noisy.status, PairedStatus::kNoisy);
  EXPECT_EQ(noisy.detail, "the 95 % interval [1.273, 1.327] is ±2.1 % after 20 rounds (target ±2.0 %)");
  EXPECT_EQ(JudgePaired(Measured(1.3, 0.019), o).status, PairedStatus::kCorrect);
  EXPECT_EQ(JudgePaired(Measured(1.3, 0.0, 11), o).status, PairedStatus::kNoisy);  // fewer than min_rounds
  o.target_rel_half_width = 0.05;
  EXPECT_EQ(JudgePaired(Measured(1.3, 0.021), o).status, PairedStatus::kCorrect);
  // A producer's note stays after the verdict's words.
  PairedRecord custom = Measured(1.3, 0.03);
  custom.detail = "paired by whole test calls";
  EXPECT_EQ(JudgePaired(custom, PairedOptions{}).detail,
            "the 95 % interval [1.261, 1.339] is ±3.0 % after 20 rounds (target ±2.0 %); paired by whole test calls");
  custom.speedup = {1.3, 1.29, 1.31};
  EXPECT_EQ(JudgePaired(custom, PairedOptions{}).detail, "paired by whole test calls");
  // Unpaired records are not judged.
  PairedRecord alone;
  alone.paired = false;
  alone.detail = "not paired: no reference";
  EXPECT_EQ(JudgePaired(alone, PairedOptions{}).detail, "not paired: no reference");
}

TEST(JudgePaired, AMergedRecordIsJudgedOnItsIntervalOnly) {
  // Its processes were judged one by one: summed after-return CPU and a speedup above the threshold do not
  // trigger rules 2 and 3 again.
  PairedRecord merged = Measured(40.0, 0.01, 60);
  merged.processes = 3;
  merged.candidate_after_cpu_s = 0.012;
  merged.candidate_window_s = 0.001;
  EXPECT_EQ(JudgePaired(merged, PairedOptions{}).status, PairedStatus::kCorrect);
  merged.speedup = {40.0, 38.0, 42.0};
  merged.rel_half_width = 0.05;
  const PairedRecord noisy = JudgePaired(merged, PairedOptions{});
  EXPECT_EQ(noisy.status, PairedStatus::kNoisy);
  EXPECT_NE(noisy.detail.find("after 60 rounds in 3 processes (target ±2.0 %)"), std::string::npos) << noisy.detail;
}

TEST(WaitQuiet, ChargesAChildProcessThatKeepsWorkingAndReturnsWhenItIsIdle) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // 30 ms of its own CPU (not of wall time: CI's loaded cores gave it 9 ms of 30), then idle
    timespec cpu{};
    do {
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    } while (cpu.tv_sec == 0 && cpu.tv_nsec < 30'000'000);
    pause();
    _exit(0);
  }
  const double after = WaitProcessQuiet(child, 2.0);
  EXPECT_GE(after, 0.029);  // waited through the busy part, however long the cores took to give it
  const auto t0 = std::chrono::steady_clock::now();
  const double idle = WaitProcessQuiet(child, 2.0);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(idle - after, 0.001);
  EXPECT_LT(waited, 0.5);  // two quiet slices, not the 2 s limit
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(ProcessCpuSeconds(child), 0.0);
  EXPECT_EQ(RunnableThreads(child), 0);
  // max_s ≤ 0: no wait, the reading as it is.
  std::atomic<int> reads{0};
  EXPECT_EQ(WaitQuiet([&] { return static_cast<double>(++reads); }, [] { return 0; }, 0), 1.0);
}

TEST(WaitQuiet, ARunnableThreadKeepsItWaiting) {
  // CPU that does not grow but a thread that is runnable (waiting for a CPU or a lock): not quiet yet.
  int slices = 0;
  const auto t0 = std::chrono::steady_clock::now();
  WaitQuiet([] { return 1.0; }, [&] { return ++slices < 5 ? 1 : 0; }, 1.0);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(slices, 6);  // four runnable slices, then two quiet ones
  EXPECT_LT(waited, 0.5);
}

}  // namespace
}  // namespace kf
