"""Atoll's errors as Python exceptions: one AtollError subclass per typed error of the
runtime (ModelMismatch, Timeout, InvalidConfig, NotReady, ...), named after it, plus
GroupLost, which only the Python side raises (a process of a replica's group failed)."""
from . import _atoll


class AtollError(Exception):
    """An Atoll error; `code` is its typed name (e.g. "model_mismatch")."""

    code = "error"


def _class_name(code):
    return "".join(part.capitalize() for part in code.split("_"))


ERRORS = {}
for _code in list(_atoll.error_names()) + ["group_lost"]:
    ERRORS[_code] = type(_class_name(_code), (AtollError,), {"code": _code, "__module__": "atoll"})
    globals()[_class_name(_code)] = ERRORS[_code]
ERRORS["group_lost"].__doc__ = ("A process of the torch.distributed group that trains this replica failed or "
                                "left: the replica leaves the run (no part of a group contributes alone).")
CLASS_NAMES = [_class_name(code) for code in ERRORS]


def typed(code, message):
    """The AtollError subclass for `code`, with the message Atoll's logs would give."""
    return ERRORS.get(code, AtollError)(f"{code}: {message}")


def call(fn, *args, **kwargs):
    """Calls into the compiled module, raising its errors as their AtollError subclass."""
    try:
        return fn(*args, **kwargs)
    except _atoll.Error as e:
        code, _, message = str(e).partition(": ")
        raise typed(code, message) from None
