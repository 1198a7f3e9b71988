"""The paired mode of the pytest plugin (``--kf-paired``; kernelfoundry.conftest holds the hooks): which items are
paired, how a measurement call is captured and timed against the reference's (kernelfoundry.paired), and the
custom benchmarks that time their own loop and write ``profile_store`` themselves.

Node ids. A paired performance test runs once per side: the session fixture ``use_reference`` is parametrised
``[kf-candidate, kf-reference]``, so its node ids carry the side ("t[4-kf-candidate]"); records, runtimes and
outcomes are kept under the plain id ("t[4]").

Custom benchmarks (the reference's documented form: the test writes its own runtimes into ``profile_store`` and
runs its timed trials inside ``profiler_session``). Their timing cannot be captured call by call, so such a
benchmark is paired by WHOLE TEST CALLS: after both sides ran once (warm-up), the test function of each side is
called again in rounds of ABBA / BAAB order (drawn per round), each call's own samples reduced to their median,
the speedup the median of the per-round ratios reference / candidate with its 95 % order-statistic interval
(kernelfoundry._measure.median_ci), until the interval is within target_rel_half_width or budget_s is spent
(then "noisy"). No value sets and no output checks: the record says so in its detail. A custom benchmark that
calls measure_runtime (any path: fixture, kernelfoundry.utils.performance, kernelfoundry.measure) is captured and
paired call by call instead, with all the checks.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any, Callable, Optional

from . import _measure
from . import paired as _paired

_monotonic = time.monotonic
_median_ci = _measure.median_ci
_judge_paired = _measure.judge_paired

SIDE_IDS = ("kf-candidate", "kf-reference")

#: At most this many rounds of whole test calls for one custom benchmark.
MAX_CALL_ROUNDS = 1000


def new_state(enabled: bool, options_json: Optional[str], usage_error: Callable[[str], Exception]) -> dict:
    """The session's paired state from ``--kf-paired`` and ``--kf-paired-options`` (JSON of
    kernelfoundry.paired.DEFAULTS keys). Raises ``usage_error(message)`` for malformed options."""
    options = dict(_paired.DEFAULTS)
    if options_json:
        try:
            given = json.loads(options_json)
        except ValueError as e:
            raise usage_error(f"--kf-paired-options: not valid JSON ({e})") from None
        unknown = sorted(set(given) - set(options)) if isinstance(given, dict) else []
        if not isinstance(given, dict) or unknown:
            raise usage_error(f"--kf-paired-options: unknown option(s) {unknown} "
                              f"(expected some of {sorted(options)})")
        options.update(given)
    return {"enabled": bool(enabled), "options": options, "captures": {}, "records": {},
            "reference_runtimes": {}, "reference_outcomes": {}, "calls": {}, "replays": {}}


def side_of(nodeid: str) -> Optional[int]:
    """0 for the candidate side, 1 for the reference side of a paired item, None otherwise."""
    if "[" not in nodeid:
        return None
    params = nodeid[nodeid.rindex("[") + 1:-1].split("-")
    for i, side in enumerate(SIDE_IDS):
        name = side.split("-")
        for j in range(len(params) - 1):
            if params[j:j + 2] == name:
                return i
    return None


def pair_key(nodeid: str) -> str:
    """The plain node id of a paired item: our side id removed ("t[4-kf-candidate]" -> "t[4]")."""
    head, _, params = nodeid.rpartition("[")
    parts = params[:-1].split("-")
    for side in SIDE_IDS:
        name = side.split("-")
        for j in range(len(parts) - 1):
            if parts[j:j + 2] == name:
                del parts[j:j + 2]
                break
    return f"{head}[{'-'.join(parts)}]" if parts else head


def is_paired(state: Optional[dict], nodeid: str) -> bool:
    """True for a node id of a paired item in a paired session."""
    return bool(state and state["enabled"] and side_of(nodeid) is not None)


def capture_fn(state: dict, store: dict, nodeid: str, samples: list, sync_for: Callable) -> Callable:
    """The measurement function of paired item `nodeid` (measure_runtime's call form; the second argument is
    sync_fn or a torch device, turned into a sync function by `sync_for`): captures the call; once the reference
    side captured the same measurement (same test, same call index), the pair is timed and its record stored.
    Returns [] on the candidate side (the pair is timed later, on the reference side: timing the candidate alone
    first would call it before the pair's probe and could change what the probe sees), the reference's per-round
    ms on the reference side (also extended into an ``output=`` list)."""
    side = side_of(nodeid)
    key = pair_key(nodeid)

    def capture(target: Callable, sync_or_device: Any = None, args: Any = None, kwargs: Any = None,
                **options: Any) -> list:
        user_output = options.pop("output", None)
        index = state["calls"].get(nodeid, 0)
        state["calls"][nodeid] = index + 1
        got = _paired.Capture(target, sync_for(sync_or_device), args, kwargs, options)
        slot = state["captures"].setdefault((key, index), [None, None])
        slot[side] = got
        samples.append(0.0)  # measured (B18): the runtimes go to the store from the pair's record
        if side == 0 or slot[0] is None:
            out = []
        else:
            record = _paired.measure_pair(slot[0], got, state["options"])
            state["captures"].pop((key, index))
            store_record(state, store, key, record)
            out = list(record.get("reference_ms", []))
        if user_output is not None:
            user_output.extend(out)
        return out

    return capture


def store_record(state: dict, store: dict, key: str, record: dict) -> None:
    """Keeps a pair's record under `key`, its candidate rounds in the runtimes and its reference rounds in
    reference_runtimes (a second measurement of the same test goes to the first record's "more")."""
    if key in state["records"]:
        state["records"][key].setdefault("more", []).append(record)
    else:
        state["records"][key] = record
    store.setdefault(key, []).extend(record.get("candidate_ms", []))
    if record.get("reference_ms"):
        state["reference_runtimes"].setdefault(key, []).extend(record["reference_ms"])


def finish_unpaired(state: dict, store: dict) -> None:
    """Candidate captures whose reference side never measured: timed alone, and said so."""
    for (key, _), (cand, ref) in list(state["captures"].items()):
        if cand is not None:
            why = "the reference's run of this benchmark did not measure (it failed or was skipped)"
            try:
                store_record(state, store, key, _paired.unpaired_record(cand, state["options"], why))
            except Exception as e:  # the candidate's own failure: no runtimes for it
                state["records"][key] = {"paired": False, "status": "error", "detail": f"{type(e).__name__}: {e}"}
    state["captures"].clear()


# ---- custom benchmarks: paired by whole test calls ----

def _samples_of(store: dict, nodeid: str) -> list:
    value = store.get(nodeid)
    return [float(v) for v in value] if isinstance(value, (list, tuple)) else []


def replay_call(store: dict, nodeid: str, call: Callable[[], Any]) -> Callable[[], float]:
    """One more run of a custom benchmark's test function: its store entry is emptied, the function called,
    and the median of the samples it recorded returned (ValueError when it recorded none or non-positive)."""
    def run() -> float:
        held = store.get(nodeid)
        if isinstance(held, list):
            del held[:]  # emptied in place: a list the test holds (output=profile_store[id]) stays the store's
        else:
            store[nodeid] = []
        call()
        samples = sorted(_samples_of(store, nodeid))
        if not samples or samples[0] <= 0:
            raise ValueError(f"{nodeid}: a run of the custom benchmark recorded no positive runtime in profile_store")
        return samples[len(samples) // 2]
    return run


def _pair_test_calls_once(cand: Callable[[], float], ref: Callable[[], float], opts: dict, seed: int) -> dict:
    """One measurement by rounds of whole test calls (module comment): its record, not judged yet."""
    rng = random.Random(seed)
    started = _monotonic()
    cand_ms: list = []
    ref_ms: list = []
    ratios: list = []
    stop, ci = "budget", (0.0, 0.0, 0.0)
    while len(ratios) < MAX_CALL_ROUNDS:
        order = (cand, ref, ref, cand) if rng.random() < 0.5 else (ref, cand, cand, ref)
        got = {id(cand): [], id(ref): []}
        for fn in order:
            got[id(fn)].append(fn())
        c, r = sum(got[id(cand)]) / 2.0, sum(got[id(ref)]) / 2.0
        cand_ms.append(c)
        ref_ms.append(r)
        ratios.append(r / c)
        ci = _median_ci(list(ratios))
        half = (ci[2] - ci[1]) / 2.0
        if len(ratios) >= int(opts["min_rounds"]) and half <= float(opts["target_rel_half_width"]) * ci[0]:
            stop = "target"
            break
        if _monotonic() - started >= float(opts["budget_s"]) and len(ratios) >= 2:
            break
    else:
        stop = "max_rounds"
    speedup, low, high = ci
    how = ("custom benchmark (its own timing loop writing profile_store): paired by whole test calls, "
           f"{len(ratios)} rounds of ABBA/BAAB order; inputs are not varied and outputs not compared")
    return {"paired": True, "status": "correct", "detail": how, "speedup": speedup, "ci": [low, high],
            "rel_half_width": (high - low) / 2.0 / speedup if speedup > 0 else float("inf"), "rounds": len(ratios),
            "warmup_rounds": 1, "calls_per_sample": 1, "checked_rounds": 0, "stop": stop, "candidate_ms": cand_ms,
            "reference_ms": ref_ms, "elapsed_s": _monotonic() - started, "value_sets": 1,
            "mode": "test_calls"}


def pair_test_calls(cand: Callable[[], float], ref: Callable[[], float], opts: dict) -> dict:
    """Times two custom benchmarks against each other by rounds of whole test calls (module comment); `cand`
    and `ref` run one test call and return its median ms. Returns the benchmark's paired record, judged by the C++
    policy (kernelfoundry._measure.judge_paired; a speedup above suspicious_speedup is measured again)."""
    seed = int(opts["seed"])
    return _judge_paired(_pair_test_calls_once(cand, ref, opts, seed), opts,
                         lambda: _pair_test_calls_once(cand, ref, opts, seed + 7919))


def note_custom_run(state: dict, store: dict, nodeid: str, call: Callable[[], Any]) -> None:
    """After a paired item's test function returned: when it captured nothing and recorded runtimes itself
    (a custom benchmark), keeps a way to run it again; on the reference side, when the candidate's is kept too,
    pairs the two by whole test calls and stores the record."""
    key = pair_key(nodeid)
    if state["calls"].get(nodeid) or not _samples_of(store, nodeid):
        return
    side = side_of(nodeid)
    replays = state["replays"].setdefault(key, [None, None])
    replays[side] = (nodeid, replay_call(store, nodeid, call))
    if side == 0 or replays[0] is None:
        return
    (cand_id, cand), (ref_id, ref) = replays
    try:
        record = pair_test_calls(cand, ref, state["options"])
    except Exception as e:  # the candidate's benchmark failed when run again: an error, never a speedup
        state["records"][key] = {"paired": False, "status": "error", "detail": f"{type(e).__name__}: {e}"}
        record = None
    finally:
        state["replays"].pop(key, None)
        store.pop(cand_id, None)
        store.pop(ref_id, None)
    if record is not None:
        store_record(state, store, key, record)


def fold_side_entries(state: dict, store: dict) -> None:
    """At report time: runtimes the tests wrote under a side's node id (a custom benchmark whose pair could not be
    formed, e.g. the reference side failed) move to the plain id, the candidate's to the runtimes and the
    reference's to reference_runtimes, with an unpaired record when there is none."""
    for nodeid in [k for k in store if side_of(k) is not None]:
        samples = _samples_of(store, nodeid)
        del store[nodeid]
        key = pair_key(nodeid)
        if key in state["records"] or not samples:
            continue
        if side_of(nodeid) == 0:
            store.setdefault(key, []).extend(samples)
            state["records"][key] = {"paired": False, "status": "correct", "candidate_ms": samples,
                                     "detail": "not paired: the reference's run of this custom benchmark recorded "
                                               "no runtimes"}
        else:
            state["reference_runtimes"].setdefault(key, []).extend(samples)
