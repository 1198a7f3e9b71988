"""Utilities of the evaluation pipeline. Task side here: ``performance``, ``sysinfo``, ``benchdnn_helper`` (the
task-side modules under the paths the reference also uses). Host side (joined when the host directory is on
``sys.path``): ``memory_file_map``, ``custom_task_helper``."""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
