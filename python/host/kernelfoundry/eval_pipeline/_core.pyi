"""Type stubs of the extension module: its classes are documented in the public modules."""

from .errors import (Error as Error, InternalError as InternalError, InvalidArgumentError as InvalidArgumentError,
                     IoError as IoError, LimitExceededError as LimitExceededError, NotFoundError as NotFoundError,
                     ParseError as ParseError, UnsafeInputError as UnsafeInputError,
                     UnsupportedError as UnsupportedError)
from .evaluation import Evaluation as Evaluation, evaluate as evaluate
from .store import ResultStore as ResultStore, open_store as open_store
from .task import (BuildResult as BuildResult, DatabaseTask as DatabaseTask, ProcessResult as ProcessResult,
                   Task as Task, TestResult as TestResult)
from .utils.memory_file_map import MemoryFileMap as MemoryFileMap
