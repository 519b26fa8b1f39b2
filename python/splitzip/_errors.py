"""Exceptions: one class per sz_status of include/splitzip/splitzip.h, all derived from splitzip.Error."""

from __future__ import annotations

from . import _splitzip as _ext


class Error(Exception):
    """A splitzip library call failed. ``status`` is the sz_status number, ``status_name`` its name
    (for example ``"SZ_ERROR_CORRUPT"``)."""

    status: int = -1

    def __init__(self, message: str = "", status: int | None = None):
        if status is not None:
            self.status = status
        self.status_name = _ext.status_name(self.status)
        text = f"{self.status_name}: {_ext.status_message(self.status)}"
        if message:
            text = f"{message}: {text}"
        super().__init__(text)


class InvalidArgumentError(Error, ValueError):
    status = 1


class DstTooSmallError(Error, ValueError):
    status = 2


class SrcTruncatedError(Error):
    status = 3


class BadMagicError(Error):
    status = 4


class UnsupportedVersionError(Error):
    status = 5


class UnsupportedDtypeError(Error, TypeError):
    status = 6


class CorruptError(Error):
    status = 7


class ChecksumError(Error):
    status = 8


class BadCodebookError(Error, ValueError):
    status = 9


class OutOfMemoryError(Error, MemoryError):
    status = 10


class IoError(Error, OSError):
    status = 11


class NotFoundError(Error, KeyError):
    status = 12


class CudaError(Error, RuntimeError):
    status = 13


class NotSupportedError(Error, NotImplementedError):
    status = 14


class WorkspaceTooSmallError(Error):
    status = 15


class InternalError(Error, RuntimeError):
    status = 16


class BookMismatchError(Error, ValueError):
    """A version 2 (channel window) frame decoded without its channel book, or with another one."""
    status = 17


_BY_STATUS = {
    cls.status: cls
    for cls in (
        InvalidArgumentError, DstTooSmallError, SrcTruncatedError, BadMagicError, UnsupportedVersionError,
        UnsupportedDtypeError, CorruptError, ChecksumError, BadCodebookError, OutOfMemoryError, IoError,
        NotFoundError, CudaError, NotSupportedError, WorkspaceTooSmallError, InternalError, BookMismatchError,
    )
}

__all__ = ["Error"] + [cls.__name__ for cls in _BY_STATUS.values()]


def error_for(status: int, message: str = "") -> Error:
    """The exception for an sz_status (a plain Error for numbers this version does not know)."""
    cls = _BY_STATUS.get(int(status))
    if cls is None:
        return Error(message, status=int(status))
    return cls(message)


def check(status: int, message: str = "") -> None:
    """Raises the exception for ``status`` unless it is SZ_OK (0)."""
    if status != 0:
        raise error_for(status, message)
