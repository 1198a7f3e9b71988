"""``kernelfoundry.TestBase`` — the base class of a task's test class (reference: kernelfoundry/test_base.py;
the older name ``kernelfoundry.custom_test.CustomTest`` is the same class).

Subclass it in ``task.py``; pytest collects the subclass's ``test_*`` methods. ``build`` (candidate) and
``build_reference`` are called by ``python -m kernelfoundry.build_target`` (kf's build stage) as
``hook(gpu_arch=<config gpu_arch>, **<hyperparameters.buildtime>)`` and return the list of artifact paths
inside the task tree (absolute, or relative to the task directory); the default builds nothing. Importing this
module is cheap (no torch).
"""

from __future__ import annotations

import logging
from typing import Any, Optional, Sequence, Union

from .compiler import compile_torch_extension as _compile_torch_extension

__all__ = ["TestBase"]

logger = logging.getLogger("kernelfoundry")

#: What get_machine_gpu_arch returns on a machine without an Intel or NVIDIA GPU: kf's name of the host target
#: (the gpu_arch of CPU tasks' config.yaml and of ``kf run --gpu-arch cpu``).
CPU_ARCH = "cpu"


class TestBase:
    """Base of a task's pytest class (the reference's TestBase / CustomTest): build hooks, the compilation
    helper and the machine's GPU architecture. Example::

        class TestRelu(TestBase):
            def build(self, gpu_arch, **buildtime_params):
                return self.compile_torch_extension("relu_kernel", "relu_kernel.cpp", Path(__file__).parent,
                                                    gpu_arch)

            @pytest.mark.performance
            def test_benchmark(self, kernel, data, measure_runtime_torch):
                measure_runtime_torch(kernel, "cpu", args=(data,))
    """

    def build(self, gpu_arch: str, **buildtime_params: Any) -> Optional[list]:
        """Builds the candidate for ``gpu_arch`` with the task's buildtime hyperparameters; returns the artifact
        paths (inside the task tree). Default: nothing to build (None; the reference returned [], kf's build
        stage treats both as "no artifacts")."""
        return None

    def build_reference(self, gpu_arch: str, **buildtime_params: Any) -> Optional[list]:
        """Builds the reference implementation; returns its artifact paths. Default: nothing to build (None)."""
        return None

    @classmethod
    def _has_build_override(cls) -> bool:
        """True when the class overrides ``build`` (the task has a build step)."""
        return cls.build is not TestBase.build

    @staticmethod
    def compile_torch_extension(extension_name: str, src: Union[str, Any, Sequence[Any]], output_dir: Any,
                                gpu_arch: str, timeout: Optional[float] = None, backend: str = "torch",
                                extra_cflags: Optional[Sequence[str]] = None,
                                extra_ldflags: Optional[Sequence[str]] = None) -> list[str]:
        """Builds ``src`` (one path or a list) into the extension ``<output_dir>/<extension_name>.so`` and returns
        ``[its absolute path]`` (kernelfoundry.compiler.compile_torch_extension). ``backend``: "torch" or "icpx".
        ``timeout`` (s): None = the task's remaining build budget under kf (600 s outside; the reference's
        default was a fixed 120 s per step). Raises RuntimeError with the compiler output (the message tells a
        module that compiled but would not import from a failed compile), BuildTimeout when a limit fired,
        ValueError for an unknown backend or a missing source."""
        return _compile_torch_extension(extension_name=extension_name, src=src, output_dir=output_dir,
                                        gpu_arch=gpu_arch, timeout=timeout, backend=backend,
                                        extra_cflags=extra_cflags, extra_ldflags=extra_ldflags)

    @staticmethod
    def get_machine_gpu_arch() -> str:
        """This machine's GPU architecture string: the device id of its Intel GPU (a discrete one preferred,
        kernelfoundry.utils.sysinfo.select_intel_gpu), else its NVIDIA compute capabilities joined by spaces
        ("8.6" or "7.5 8.6"), else "cpu" — kf's host target (the reference raised ValueError here, which made
        ``python task.py`` of a CPU task fail on every machine without a GPU; a task that needs a GPU fails at
        its build or its tests with the compiler's or the runtime's own message)."""
        from .utils.sysinfo import get_nvidia_compute_capabilities, select_intel_gpu  # noqa: PLC0415

        intel = select_intel_gpu()
        if intel is not None:
            return intel[1]
        caps = get_nvidia_compute_capabilities()
        if caps:
            return " ".join(caps)
        logger.info("no Intel or NVIDIA GPU found: gpu_arch %r (the host)", CPU_ARCH)
        return CPU_ARCH

    @staticmethod
    def validate() -> None:
        """Hook for task-specific checks of the task definition (data files present, tools executable, ...);
        override it and raise to reject the task. Default: nothing."""
