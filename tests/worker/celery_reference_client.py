"""A stock Python Celery client configured like the reference's celery_app.py (msgpack, rpc://), doing what
its TaskRunner does: the worker-discovery check, then build_custom_task, test_custom_task per arch and
test_sleep. Used by tests/worker/farm_e2e_test.cc against `kf worker`.

usage: /usr/bin/python3 celery_reference_client.py BROKER_URL ENCODED_TASK.json OUT.json

Queues follow TaskRunner: queue_override_build or build_custom_task_<language>, queue_override_test or
test_custom_task_<arch> for each arch of config gpu_arch. OUT.json receives what came back, checked for the
reference's shapes (ProcessResult(**d) must not raise).
"""
import dataclasses
import json
import sys
import time
from typing import Any, Optional

from celery import Celery

BUILD = "kernelfoundry.eval_pipeline.tasks.build_custom_task.build_custom_task"
TEST = "kernelfoundry.eval_pipeline.tasks.test_custom_task.test_custom_task"
SLEEP = "kernelfoundry.eval_pipeline.tasks.test_sleep.test_sleep"
TASK_KEYS = ["task_data", "has_build_step", "has_reference_build_step", "correctness_tests", "profile_tests",
             "config", "blocks", "extract_code_result", "build_result", "build_result_reference", "test_result",
             "test_result_reference", "hyperparameters"]
TEST_RESULT_KEYS = {"worker_info", "correctness_result", "performance_result", "trace_results", "results_per_gpu"}


@dataclasses.dataclass
class ProcessResult:  # the reference's dataclass: extra keys raise TypeError
    returncode: int
    stdout: str
    stderr: str
    message: Optional[str] = None
    output_data: Optional[Any] = None


def check_pr(d):
    if d is None:
        return None
    pr = ProcessResult(**d)
    assert isinstance(pr.stdout, str) and isinstance(pr.stderr, str)
    return pr


def main():
    broker, task_path, out_path = sys.argv[1:4]
    app = Celery("tasks", broker=broker, backend="rpc://")
    app.conf.update(task_serializer="msgpack", result_serializer="msgpack", accept_content=["msgpack", "json"])
    encoded = json.load(open(task_path))
    config = encoded["config"]
    archs = [a.strip() for a in config["gpu_arch"].split(",") if a.strip()]
    report = {}

    # TaskRunner.init(use_queue=True): every arch's test queue must be served by a live worker.
    t0 = time.time()
    report["inspect_timeout"] = 5.0
    active = app.control.inspect(timeout=report["inspect_timeout"]).active_queues() or {}
    report["inspect_seconds"] = time.time() - t0
    names = [q["name"] for queues in active.values() for q in queues]
    report["active_queue_names"] = names
    report["nodes"] = sorted(active.keys())
    for arch in archs:
        assert f"test_custom_task_{arch}" in names, f"no worker serves test_custom_task_{arch}: {names}"

    timeout = config.get("build_timeout") or 120
    build_queue = config.get("queue_override_build") or f"build_custom_task_{config['language'].lower()}"
    built = app.send_task(BUILD, args=(encoded,), queue=build_queue, retries=1, soft_time_limit=timeout + 10,
                          time_limit=timeout + 30).get(timeout=timeout + 40)
    assert list(built.keys()) == TASK_KEYS, list(built.keys())
    br = built["build_result"]
    assert set(br.keys()) == {"worker_info", "result", "artifacts"}, br.keys()
    check_pr(br["result"])
    assert "gpu_name" in br["worker_info"], br["worker_info"].keys()
    report["build_returncode"] = br["result"]["returncode"]
    report["build_message"] = br["result"]["message"]
    report["artifacts"] = sorted((br["artifacts"] or {}).keys())
    for path, entry in (br["artifacts"] or {}).items():
        assert isinstance(entry["content"], str)  # base64 text, never bytes

    test_timeout = (config.get("test_timeout") or 120) * 5
    report["tests"] = {}
    for arch in archs:
        queue = config.get("queue_override_test") or f"test_custom_task_{arch}"
        result = app.send_task(TEST, args=(built,), queue=queue).get(timeout=test_timeout + 40)
        for variant, tr in result.items():
            assert set(tr.keys()) == TEST_RESULT_KEYS, tr.keys()
            check_pr(tr["correctness_result"])
            check_pr(tr["performance_result"])
            for trace in tr["trace_results"].values():
                check_pr(trace)
            assert "gpu_name" in tr["worker_info"]
        report["tests"][arch] = {
            variant: {
                "correctness_returncode": tr["correctness_result"]["returncode"],
                "performance_returncode": (tr["performance_result"] or {}).get("returncode"),
                "runtimes": ((tr["performance_result"] or {}).get("output_data") or {}).get("runtimes"),
            }
            for variant, tr in result.items()
        }

    report["sleep"] = app.send_task(SLEEP, args=(0.1, "hello from python"), queue=build_queue).get(timeout=30)
    # JSON bodies are accepted too (accept_content lists json).
    report["sleep_json"] = app.send_task(SLEEP, args=(0.1, "json body"), queue=build_queue,
                                         serializer="json").get(timeout=30)
    # A failure comes back as the exception it names.
    try:
        app.send_task(BUILD, args=({"not": "a task"},), queue=build_queue).get(timeout=60)
        report["bad_task_error"] = None
    except Exception as e:  # noqa: BLE001 - we report whatever Celery raised
        report["bad_task_error"] = f"{type(e).__module__}.{type(e).__name__}: {e}"
    json.dump(report, open(out_path, "w"), indent=2)


if __name__ == "__main__":
    main()
