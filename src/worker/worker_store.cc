// The worker's store: opened from --db, written only through the record module (kf::RecordWorkerJob).
#include "kernelfoundry/record.hpp"
#include "kernelfoundry/worker.hpp"
#include "worker/worker_impl.hpp"

namespace kf {

WorkerJob ToWorkerJob(const JobRecord& rec) {
  WorkerJob job;
  const std::string& task = rec.message.task;
  job.body = task == celery::kBuildTaskName ? WorkerBody::kBuild
             : task == celery::kTestTaskName ? WorkerBody::kTest
                                             : WorkerBody::kOther;
  job.task = task;
  job.task_short = celery::TaskShortName(task);
  job.celery_id = rec.message.id;
  job.args = rec.message.args;
  job.node = rec.node;
  job.queue = rec.queue;
  job.delivery = rec.delivery;
  job.status = rec.status;
  job.result = rec.result;
  job.seconds = rec.seconds;
  job.cached = rec.cached;
  return job;
}

std::unique_ptr<Store> OpenWorkerStore(const std::string& db) {
  if (db.empty()) return nullptr;
  return OpenStore(db);
}

}  // namespace kf
