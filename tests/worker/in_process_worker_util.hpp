// A fixture for tests of the worker on the in-memory broker: a Worker on a thread of the test process
// (run_in_process), its own task queue, a Celery client for sending and waiting, and the worker's log lines.
// Used by worker_test.cc (message handling) and worker_cancel_test.cc (cancellation, device slots).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

#include "kernelfoundry/farm.hpp"
#include "kernelfoundry/worker.hpp"

namespace kf::testing {

class InProcessWorkerTest : public ::testing::Test {
 protected:
  /// `queue_prefix` + 8 random characters names the task queue of each test.
  explicit InProcessWorkerTest(std::string queue_prefix) : queue_prefix_(std::move(queue_prefix)) {}

  void SetUp() override { queue_ = queue_prefix_ + NewUuid().substr(0, 8); }
  void TearDown() override {
    if (thread_.joinable()) StopWorker(true);
  }

  /// Options every case shares: the memory broker, this test's queue, node `node_name`, run in process,
  /// fast reconnects (10–50 ms) and the log collected for Lines().
  WorkerOptions BaseOptions(const std::string& node_name) {
    WorkerOptions o;
    o.connect = hub_.Factory();
    o.broker_display = "memory://";
    o.queues = {queue_};
    o.node_name = node_name;
    o.run_in_process = true;
    o.reconnect_min = std::chrono::milliseconds(10);
    o.reconnect_max = std::chrono::milliseconds(50);
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(lines_mu_);
      lines_ += line + "\n";
    };
    return o;
  }
  void StartWorker(WorkerOptions o) {
    worker_ = std::make_unique<Worker>(std::move(o));
    thread_ = std::thread([this] { worker_->Run(); });
  }
  void StopWorker(bool immediate = false) {
    worker_->RequestStop(immediate);
    thread_.join();
  }
  CeleryClient& Client() {
    if (!client_) client_ = std::make_unique<CeleryClient>(hub_.Connect());
    return *client_;
  }
  /// Sends task `task` with `args` to this test's queue; returns the task id.
  std::string SendTask(std::string_view task, const Json& args, celery::SendOptions o = {}) {
    o.queue = queue_;
    return Client().Send(task, args, o);
  }
  /// The result of task `id`, waiting up to `ms` milliseconds; a test failure (with the log) and an empty
  /// result when none came.
  celery::TaskResult Wait(const std::string& id, int ms) {
    auto r = Client().WaitAny({id}, std::chrono::milliseconds(ms));
    if (!r) {
      ADD_FAILURE() << "no result for " << id << "\n" << Lines();
      return {};
    }
    return *r;
  }
  /// The worker's log so far, one line each.
  std::string Lines() {
    std::lock_guard<std::mutex> lock(lines_mu_);
    return lines_;
  }
  static std::string ExcType(const celery::TaskResult& r) { return r.result.value("exc_type", ""); }
  static std::string ExcMessage(const celery::TaskResult& r) {
    const Json& m = r.result.value("exc_message", Json::array());
    return m.empty() ? "" : m[0].get<std::string>();
  }

  MemoryBroker hub_;
  std::string queue_;
  std::unique_ptr<Worker> worker_;
  std::thread thread_;
  std::unique_ptr<CeleryClient> client_;

 private:
  std::string queue_prefix_;
  std::mutex lines_mu_;
  std::string lines_;
};

}  // namespace kf::testing
