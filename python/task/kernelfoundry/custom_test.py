"""``kernelfoundry.custom_test.CustomTest`` — the reference's older name of the task test base class. It is
``kernelfoundry.TestBase`` itself (kernelfoundry.test_base), so old and new task packages share one class: the
same build hooks, ``compile_torch_extension``, ``get_machine_gpu_arch`` and ``validate``."""

from .test_base import TestBase as CustomTest

__all__ = ["CustomTest"]
