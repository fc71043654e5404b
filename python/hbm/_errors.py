"""hbm's exceptions: one per library status that callers tell apart, all hbm.Error."""


class Error(Exception):
    """A failure in libhbm. str(e) is the library's message (hbm_last_error()).

    status: the status name ("HBM_ERR_PARSE"), code: its value, status_text: its
    description ("parse error"), message: the library's message.
    """

    def __init__(self, message, status="HBM_ERR_INVALID", code=-1, status_text=""):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.status_text = status_text


class ParseError(Error):
    """Input that could not be read. file, line and column locate it when the library's
    message does ("module.hlo:12:7: ..."); otherwise they are None (byte offsets of
    binary inputs are in the message)."""

    def __init__(self, message, status="HBM_ERR_PARSE", code=-6, status_text="", where=None):
        super().__init__(message, status, code, status_text)
        self.file, self.line, self.column = where if where else (None, None, None)


class ConfigError(Error):
    """A bad configuration value (the message names the key or variable and the value)."""


class OutOfMemory(Error):
    """The device ran out of memory (RESOURCE_EXHAUSTED); the message is the library's."""


class LibraryNotFound(Error, ImportError):
    """libhbm.so was not found; the message lists where it was looked for."""

    def __init__(self, message):
        Error.__init__(self, message, "HBM_ERR_NOT_AVAILABLE", -4, "not available")


class MissingDependency(Error, ImportError):
    """A Python package hbm.jax needs is not installed (JAX, libtpu for a TPU device, ...):
    `package` names it and the message says how to install it."""

    def __init__(self, message, package):
        Error.__init__(self, message, "HBM_ERR_NOT_AVAILABLE", -4, "not available")
        self.package = package


class TopologyError(Error):
    """A TPU topology JAX does not know, or a mesh that needs more devices than the topology
    (or the backend) has: the message names the value and what is known."""

    def __init__(self, message):
        Error.__init__(self, message, "HBM_ERR_INVALID", -1, "invalid argument")


_CLASSES = {"HBM_ERR_CONFIG": ConfigError, "HBM_ERR_OOM": OutOfMemory}


def from_status(code, name, status_text, message, where):
    if name == "HBM_ERR_PARSE":
        return ParseError(message, name, code, status_text, where)
    return _CLASSES.get(name, Error)(message, name, code, status_text)
