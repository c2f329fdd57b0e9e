"""User-facing errors.

Every error a user can cause (bad file, no cluster, no plugin, no store) is a
:class:`UserError`. The CLI prints its message on one line and exits with
``exit_code`` (2), never with a traceback.
"""


class UserError(Exception):
    """An error caused by input or environment, reported without a traceback."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message

    def __reduce__(self):
        # subclasses take other constructor arguments: rebuild from the state, so an
        # error raised in a worker process reaches the parent as it was
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls, args, state):
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class InputError(UserError):
    """A malformed input file; message carries ``file:line``."""

    def __init__(self, path, line: int | None, problem: str):
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {problem}")
        self.path = str(path)
        self.line = line
        self.problem = problem


class ClusterError(UserError):
    """No cluster answers, or it answered with something we cannot use."""


class PluginMissingError(ClusterError):
    """The cluster answers but has no LTR plugin."""


class StoreMissingError(ClusterError):
    """The feature store does not exist."""


class MissingResourceError(ClusterError):
    """A feature set or model the request names is not in the store."""


class ProvisionError(UserError):
    """The local node could not be provisioned (Java, Maven, artifacts)."""
