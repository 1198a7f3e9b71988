// The task SDK's protocol and paired mode (include/kernelfoundry/sdk/task_sdk.hpp): Main, the paired meeting of the
// two sides and measure_runtime's work. Compiled once with kf (the prebuilt SDK object that $KF_SDK_LINK names)
// rather than in every test program: these functions hold most of the SDK's JSON and timing code, which took
// ~8 s of a test program's 14 s compile at -O3 when they were inline in the header.
#include "kernelfoundry/sdk/task_sdk.hpp"

namespace kf::sdk {

/// Times the candidate's `target` against the reference side's (paired mode, main thread). Returns the
/// candidate's per-round samples.
std::vector<double> MeasurePairedBenchmark(const std::function<void()>& target, const std::function<void()>& sync,
                                           const TimedData* data) {
  State& st = GetState();
  PairedMeeting& m = *st.meeting;
  std::unique_lock<std::mutex> lock(m.mu);
  m.cv.wait(lock, [&] { return m.reference.has_value() || m.reference_ended; });
  kf::PairedRecord record;
  std::vector<double> samples;
  if (!m.reference) {  // the reference side never measured: time the candidate alone
    lock.unlock();
    if (data != nullptr && data->load) data->load(0);
    kf::MeasureResult r = kf::MeasureRuntime(target, WithDeviceSync(sync), kf::MeasureOptions{});
    samples = r.trial_ms;
    record.paired = false;
    record.detail = "not paired: the reference's run of this benchmark did not measure" +
                    (m.reference_error.empty() ? std::string() : " (" + m.reference_error + ")");
  } else {
    PairedCall ref = *m.reference;
    lock.unlock();
    kf::PairedOptions o = kf::PairedOptionsFromJson(st.paired_options);
    // This thread calls both sides' lambdas, so it takes each side's identity for the call: a lambda that picks
    // its implementation when called (`use_reference() ? Reference(x) : Candidate(x)`, as examples/tasks/
    // omp_reduction does) would otherwise run the candidate on both sides (regression, 2026-12-01: omp_reduction's
    // fast.cpp scored 1.00x paired and 4.2x separate). The same thread-local write on both sides.
    auto as_side = [](int side, const std::function<void()>& f) -> std::function<void()> {
      if (!f) return f;
      return [side, f] {
        ThreadSide() = side;
        f();
        ThreadSide() = 0;
      };
    };
    // Each window ends after the whole device is synchronised (device_timing.hpp): side-stream work is timed.
    kf::PairedSide cand_side{nullptr, as_side(0, target), as_side(0, WithDeviceSync(sync)), nullptr},
        ref_side{nullptr, as_side(1, ref.target), as_side(1, WithDeviceSync(ref.sync)), nullptr};
    kf::PairedCheck check;
    const bool rotate = data != nullptr && ref.data && data->load && ref.data->load && data->output &&
                        ref.data->output;
    if (rotate) {  // both sides get each load's value set; checked rounds compare the outputs
      auto plan = std::make_shared<ValueSetPlan>(std::min(data->sets, ref.data->sets), o.seed);
      const TimedData cand_data = *data, ref_data = *ref.data;
      cand_side.prepare = [plan, cand_data](int64_t load) {
        ThreadSide() = 0;
        cand_data.load(plan->SetFor(load));
      };
      ref_side.prepare = [plan, ref_data](int64_t load) {
        ThreadSide() = 1;
        ref_data.load(plan->SetFor(load));
        ThreadSide() = 0;
      };
      check = [cand_data, ref_data, &st](int64_t) { return CheckTimedOutputs(cand_data, ref_data, st.paired_options); };
    }
    if (std::function<void()> flush = DeviceFlusher(st.paired_options, &o)) {  // cold L2, outside the windows
      for (kf::PairedSide* s : {&cand_side, &ref_side}) {
        s->prepare = [load = s->prepare, flush](int64_t key) {
          if (load) load(key);
          flush();
        };
      }
    }
    if (st.remote_start && !st.executor_path.empty()) {
      // The candidate runs in the executor (remote.hpp): its after-return CPU is the executor's, and the
      // reference side makes as many empty round trips per call as the candidate's call made remote calls.
      st.remote_start();
      auto per_call = std::make_shared<std::atomic<long long>>(0);
      cand_side.call = [per_call, f = cand_side.call, &st] {
        const long long before = st.remote_calls.load();
        f();
        per_call->store(st.remote_calls.load() - before);
      };
      ref_side.call = [per_call, f = ref_side.call, &st] {
        for (long long i = per_call->load(); i > 0; --i) st.remote_ping();
        f();
      };
      cand_side.settle = [&st, max_s = o.quiesce_max_s] { return st.remote_settle(max_s); };
    }
    NoteDeviceClocks(/*before=*/true);
    kf::PairedResult r = kf::MeasurePaired(cand_side, ref_side, o, check);
    // The one verdict policy (kernelfoundry/paired_record.hpp); a speedup above suspicious_speedup is measured
    // again with the next seed.
    record = kf::JudgePaired(kf::RecordOf(r), o, [&] {
      kf::PairedOptions again = o;
      again.seed += 7919;
      return kf::RecordOf(kf::MeasurePaired(cand_side, ref_side, again, check));
    });
    NoteDeviceClocks(/*before=*/false);
    if (rotate) record.value_sets = std::min(data->sets, ref.data->sets);
    samples = r.candidate_ms;
    lock.lock();
    m.reference_ms = r.reference_ms;
    m.measured = true;
    m.cv.notify_all();
  }
  st.paired_records[st.current] = kf::ToJson(record);
  return samples;
}


/// measure_runtime's work, with or without rotating inputs (internal; see the two overloads).
std::vector<double> MeasureRuntimeWith(const std::function<void()>& target, const std::function<void()>& sync,
                                       const kf::MeasureOptions& options, const TimedData* data) {
  State& st = GetState();
  std::vector<double> samples;
  if (st.paired && st.meeting != nullptr && ThreadSide() == 1) {  // the reference side: hand over, wait
    PairedMeeting& m = *st.meeting;
    std::unique_lock<std::mutex> lock(m.mu);
    m.reference = PairedCall{target, sync, data ? std::optional<TimedData>(*data) : std::nullopt};
    m.cv.notify_all();
    m.cv.wait(lock, [&] { return m.measured; });
    return m.reference_ms;
  }
  if (st.paired && st.meeting != nullptr && ThreadSide() == 0) {
    samples = MeasurePairedBenchmark(target, sync, data);
  } else {
    kf::MeasureOptions o = options;
    if (auto name = kf::DetectProfiler()) o.profiler_mode = kf::ProfilerModeFor(name);
    static kf::PerfControl perf = kf::PerfControl::FromEnvironment();
    if (data != nullptr && data->load) data->load(0);
    kf::MeasureResult r = kf::MeasureRuntime(target, WithDeviceSync(sync), o, perf.Hooks());
    st.timed_calls += r.plan.inner_iters > 0 ? r.plan.trials * r.plan.inner_iters
                                             : static_cast<long long>(r.trial_ms.size());
    samples = std::move(r.trial_ms);
  }
  auto& slot = st.runtimes[st.current];
  if (!slot.is_array()) slot = nlohmann::ordered_json::array();
  for (double ms : samples) slot.push_back(ms);
  return samples;
}


/// Runs a benchmark's body on both sides at once (paired mode): the reference side in a helper thread, the
/// candidate side here. Returns the reference side's outcome: "" when it passed, else its error.
std::string RunPairedBody(const TestCase& t) {
  State& st = GetState();
  PairedMeeting meeting;
  st.meeting = &meeting;
  std::thread reference([&] {
    ThreadSide() = 1;
    std::string error;
    try {
      t.body();
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown exception";
    }
    std::lock_guard<std::mutex> lock(meeting.mu);
    meeting.reference_ended = true;
    meeting.reference_error = error;
    meeting.cv.notify_all();
  });
  ThreadSide() = 0;
  struct Join {  // the reference side ends with its body, also when the candidate side throws
    std::thread& t;
    PairedMeeting& m;
    ~Join() {
      {
        std::lock_guard<std::mutex> lock(m.mu);
        m.measured = true;  // releases a reference side still waiting in measure_runtime
        m.cv.notify_all();
      }
      t.join();
      ThreadSide() = -1;
      GetState().meeting = nullptr;
    }
  } join{reference, meeting};
  t.body();  // may throw: handled by the caller, the guard joins the reference side
  {
    std::unique_lock<std::mutex> lock(meeting.mu);
    meeting.measured = true;
    meeting.cv.notify_all();
    meeting.cv.wait(lock, [&] { return meeting.reference_ended; });
  }
  if (!meeting.reference_ms.empty()) st.reference_runtimes[t.name] = meeting.reference_ms;
  return meeting.reference_error;
}

/// Runs the protocol (see the file comment). Returns the exit code.
int Main(int argc, char** argv) {
  const auto started = std::chrono::steady_clock::now();
  State& st = GetState();
  bool list = false, run = false;
  std::string select;
  int fd = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--kf-list") list = true;
    else if (a == "--kf-run") run = true;
    else if (a == "--kf-ref") st.reference = true;
    else if (a.rfind("--kf-select=", 0) == 0) select = a.substr(12);
    else if (a.rfind("--kf-result-fd=", 0) == 0) fd = std::atoi(a.c_str() + 15);
    else if (a.rfind("--kf-executor=", 0) == 0) st.executor_path = a.substr(14);
    else if (a == "--kf-paired") st.paired = true;
    else if (a.rfind("--kf-paired-options=", 0) == 0) {
      try {
        st.paired_options = nlohmann::ordered_json::parse(a.substr(20));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "kf sdk: --kf-paired-options is not JSON: %s\n", e.what());
        return 2;
      }
    }
    else if (a.rfind("--kf-runtime-params=", 0) == 0) {
      try {
        st.runtime_params = nlohmann::ordered_json::parse(a.substr(20));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "kf sdk: --kf-runtime-params is not JSON: %s\n", e.what());
        return 2;
      }
    } else {
      std::fprintf(stderr, "kf sdk: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (list) {
    nlohmann::ordered_json doc = {{"tests", nlohmann::ordered_json::array()}};
    for (const auto& t : st.tests) doc["tests"].push_back({{"name", t.name}, {"kind", t.kind}});
    std::printf("%s\n", doc.dump().c_str());
    return 0;
  }
  if (!run || (select != "correctness" && select != "performance")) {
    std::fprintf(stderr, "usage: %s --kf-list | --kf-run --kf-select=correctness|performance [--kf-ref] "
                 "[--kf-runtime-params=JSON] --kf-result-fd=N\n", argv[0]);
    return 2;
  }
  nlohmann::ordered_json doc = {{"tests", nlohmann::ordered_json::array()}, {"runtimes", nullptr},
                                {"skipped_reason", nullptr}};
  const bool paired = st.paired && select == "performance";
  nlohmann::ordered_json reference_tests = nlohmann::ordered_json::array();
  bool failed = false;
  for (const auto& t : st.tests) {
    if (t.kind != select) continue;
    st.current = t.name;
    std::string status = "passed", message;
    try {
      if (paired) {
        const std::string reference_error = RunPairedBody(t);
        reference_tests.push_back({{"name", t.name}, {"kind", t.kind},
                                   {"status", reference_error.empty() ? "passed" : "failed"},
                                   {"message", reference_error}});
      } else {
        t.body();
      }
    } catch (const Skip& e) {
      status = "skipped";
      message = e.what();
      if (doc["skipped_reason"].is_null()) doc["skipped_reason"] = message;
    } catch (const BuildFailure& e) {
      status = "error";
      message = e.what();
      if (!doc.contains("build_error")) {
        // The log can be huge (1,500 warnings); the message already names the first error. Head and tail
        // are kept so the document stays well under the pipe's cap.
        std::string log = e.log;
        constexpr size_t kHalf = 32 * 1024;
        if (log.size() > 2 * kHalf) {
          log = log.substr(0, kHalf) + "\n[... " + std::to_string(log.size() - 2 * kHalf) + " bytes cut by kf ...]\n" +
                log.substr(log.size() - kHalf);
        }
        doc["build_error"] = {{"message", message}, {"log", log}};
      }
    } catch (const Failure& e) {
      status = "failed";
      message = e.what();
    } catch (const std::exception& e) {
      status = "error";
      message = e.what();
    } catch (...) {
      status = "error";
      message = "unknown exception";
    }
    if (status == "failed" || status == "error") failed = true;
    std::string upper = status == "passed" ? "PASSED" : status == "skipped" ? "SKIPPED" : "FAILED";
    std::printf("%s %s%s%s\n", t.name.c_str(), upper.c_str(), message.empty() ? "" : ": ", message.c_str());
    std::fflush(stdout);
    doc["tests"].push_back({{"name", t.name}, {"kind", t.kind}, {"status", status}, {"message", message}});
  }
  doc["runtimes"] = st.runtimes;
  if (paired) {
    doc["paired"] = st.paired_records;
    doc["reference_runtimes"] = st.reference_runtimes;
    doc["reference_tests"] = reference_tests;
    doc["conditions"] = {{"threads", std::getenv("KF_THREADS") ? std::atoi(std::getenv("KF_THREADS")) : 0},
                         {"device", DeviceConditions()}};
  }
  doc["timed_calls"] = st.timed_calls;
  doc["elapsed_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  std::string text = doc.dump();
  if (fd >= 0) {
    size_t off = 0;
    while (off < text.size()) {
      ssize_t n = ::write(fd, text.data() + off, text.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }
  return failed ? 1 : 0;
}

}  // namespace kf::sdk
