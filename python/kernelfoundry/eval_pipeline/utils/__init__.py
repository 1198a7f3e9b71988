"""Utilities of the evaluation pipeline (``memory_file_map``, ``custom_task_helper``)."""
