"""kernelfoundry.eval_pipeline.errors — the exceptions of the C++ core.

One class per ``kf::ErrorKind`` (include/kernelfoundry/error.hpp), all derived from :class:`Error`, mapped in
one table (python/src/core/errors.cc, the counterpart of the CLI's exit codes). Each class also derives from
the builtins the Python reference raises for that kind of failure, so ``except KeyError`` /
``except ValueError`` / ``except AssertionError`` written against the reference still catches it:

=====================  ==================  ==================================================================
class                  kind                also a
=====================  ==================  ==================================================================
InvalidArgumentError   invalid_argument    ValueError, AssertionError (validate), RuntimeError (collection)
NotFoundError          not_found           FileNotFoundError, KeyError, AssertionError (block index)
ParseError             parse               ValueError, KeyError (Task.decode), TypeError (ProcessResult decode)
IoError                io                  OSError
LimitExceededError     limit               ValueError
UnsafeInputError       unsafe              ValueError
UnsupportedError       unsupported         NotImplementedError
InternalError          internal            RuntimeError
=====================  ==================  ==================================================================

``str(e)`` is the C++ message line ``"<file>: <field>: <message>"``; ``e.kind``, ``e.file``, ``e.field`` and
``e.message`` carry its parts.
"""

from __future__ import annotations

from ._core import (Error, InternalError, InvalidArgumentError, IoError, LimitExceededError, NotFoundError,
                    ParseError, UnsafeInputError, UnsupportedError)

__all__ = ["Error", "InvalidArgumentError", "NotFoundError", "ParseError", "IoError", "LimitExceededError",
           "UnsafeInputError", "UnsupportedError", "InternalError"]
