"""Utilities of the evaluation pipeline (``memory_file_map``, ``custom_task_helper``, ``performance``, ``sysinfo``,
``benchdnn_helper``: the last three are the task-side modules under the paths the reference also uses)."""
