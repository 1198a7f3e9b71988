"""A small Python Celery worker standing in for the reference's: it registers the reference's task names
(build_custom_task, test_custom_task, test_sleep) with the reference's app settings (msgpack, rpc://,
track_started) and runs each body with `kf celery-task` in a subprocess, returning text-only results as the
reference's workers do (kf's output_data extensions removed). Used by
tests/worker/farm_e2e_test.cc to show that `kf run --broker` works against a Python Celery farm.

usage: KF_BIN=/path/to/kf /usr/bin/python3 celery_standin_worker.py BROKER_URL QUEUES NODE_NAME
"""
import json
import os
import subprocess
import sys
import tempfile

from celery import Celery

BUILD = "kernelfoundry.eval_pipeline.tasks.build_custom_task.build_custom_task"
TEST = "kernelfoundry.eval_pipeline.tasks.test_custom_task.test_custom_task"
SLEEP = "kernelfoundry.eval_pipeline.tasks.test_sleep.test_sleep"

broker, queues, node = sys.argv[1:4]
app = Celery("tasks", broker=broker, backend="rpc://")
app.conf.update(task_serializer="msgpack", result_serializer="msgpack", accept_content=["msgpack", "json"])


def strip_kf_extensions(value):
    """Removes kf's own keys from every output_data (kf_verdict, kf_termination): the reference's workers
    send text only, and so does this stand-in, so that kf's client classifies the results from their text."""
    if isinstance(value, dict):
        data = value.get("output_data")
        if isinstance(data, dict):
            for key in [k for k in data if k.startswith("kf_")]:
                del data[key]
            if not data:
                value["output_data"] = None
        for v in value.values():
            strip_kf_extensions(v)
    elif isinstance(value, list):
        for v in value:
            strip_kf_extensions(v)
    return value


def run_kf(name, args, queue):
    with tempfile.TemporaryDirectory(prefix="kf_standin_") as tmp:
        args_path = os.path.join(tmp, "args.json")
        out_path = os.path.join(tmp, "out.json")
        with open(args_path, "w") as f:
            json.dump(args, f)
        proc = subprocess.run([os.environ["KF_BIN"], "celery-task", name, args_path, "-o", out_path,
                               "--queue", queue or ""], capture_output=True, text=True)
        if not os.path.exists(out_path):
            raise RuntimeError(f"kf celery-task {name} exited {proc.returncode}: {proc.stderr[-2000:]}")
        doc = json.load(open(out_path))
    if doc["status"] != "SUCCESS":
        exc = doc["result"]
        raise RuntimeError(f"{exc['exc_type']}: {exc['exc_message'][0]}")
    return strip_kf_extensions(doc["result"])


@app.task(name=BUILD, bind=True, track_started=True)
def build_custom_task(self, encoded_task):
    return run_kf("build_custom_task", [encoded_task], self.request.delivery_info.get("routing_key"))


@app.task(name=TEST, bind=True, track_started=True)
def test_custom_task(self, encoded_task):
    return run_kf("test_custom_task", [encoded_task], self.request.delivery_info.get("routing_key"))


@app.task(name=SLEEP, track_started=True)
def test_sleep(duration, message):
    import time
    time.sleep(duration)
    return message


if __name__ == "__main__":
    app.worker_main(["worker", "-Q", queues, "-c", "1", "-n", node, "--without-gossip", "--without-mingle",
                     "--loglevel", "INFO"])
