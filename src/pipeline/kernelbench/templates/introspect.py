# Introspection script of `kf import-kernelbench` (run as `python -c <this> DIR`, DIR holding problem.py):
# argument kinds/shapes of get_inputs() and get_init_inputs(), the Model's state_dict() names/shapes, and the
# parameter names of Model.forward / Model.__init__. Tensor factories go to the meta device first so GPU-scale
# sizes cost no memory; real tensors on failure. Prints one line "KF_INTROSPECTION_JSON {...}" on stdout
# (the marker is kIntrospectMarker in kernelbench_templates.cc).
import importlib, inspect, json, sys
sys.path.insert(0, sys.argv[1])
import torch

FACTORIES = ["rand", "randn", "randint", "zeros", "ones", "empty", "full", "arange", "linspace", "eye", "tensor"]

def arg(v, where):
    if isinstance(v, torch.Tensor):
        return {"kind": "tensor", "shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")}
    if isinstance(v, bool):
        return {"kind": "bool", "value": v}
    if isinstance(v, int):
        return {"kind": "int", "value": v}
    if isinstance(v, float):
        return {"kind": "float", "value": v}
    if isinstance(v, (list, tuple)) and v and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
        return {"kind": "int_list", "value": list(v)}
    if isinstance(v, (list, tuple)) and v and all(isinstance(e, (int, float)) and not isinstance(e, bool) for e in v):
        return {"kind": "float_list", "value": [float(e) for e in v]}
    return {"kind": "unsupported", "type": type(v).__name__, "where": where, "repr": repr(v)[:200]}

def params(fn, skip):
    try:
        return [p.name for p in list(inspect.signature(fn).parameters.values())[skip:]
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []

def collect(meta):
    saved = {}
    if meta:
        for name in FACTORIES:
            if name == "tensor":
                continue
            fn = getattr(torch, name)
            saved[name] = fn
            def wrapped(*a, __fn=fn, **k):
                k.setdefault("device", "meta")
                return __fn(*a, **k)
            setattr(torch, name, wrapped)
    try:
        problem = importlib.import_module("problem")
        torch.manual_seed(0)
        init_inputs = list(problem.get_init_inputs())
        inputs = list(problem.get_inputs())
        model = problem.Model(*init_inputs)
        state = [{"name": k, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
                 for k, t in model.state_dict().items()]
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)
    return {
        "inputs": [arg(v, f"get_inputs()[{i}]") for i, v in enumerate(inputs)],
        "state": state,
        "init_inputs": [arg(v, f"get_init_inputs()[{i}]") for i, v in enumerate(init_inputs)],
        "forward_params": params(problem.Model.forward, 1),
        "init_params": params(problem.Model.__init__, 1),
        "meta": meta,
    }

try:
    result = collect(True)
except Exception:
    sys.modules.pop("problem", None)
    result = collect(False)
print("KF_INTROSPECTION_JSON " + json.dumps(result))
