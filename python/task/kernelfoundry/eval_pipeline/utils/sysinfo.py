"""``kernelfoundry.eval_pipeline.utils.sysinfo`` — the path where the reference's newer sysinfo module lives
(worker info, Intel GPU discovery, NVIDIA compute capabilities, tool versions). It is the very module
``kernelfoundry.utils.sysinfo`` (one implementation; a test that patches ``subprocess.run`` through either path
patches both)."""

import sys

from ...utils import sysinfo as _sysinfo

sys.modules[__name__] = _sysinfo
