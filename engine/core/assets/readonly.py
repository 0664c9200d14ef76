"""Read-only arrays for the immutable assets, and the error their validation raises."""
from __future__ import annotations

from typing import Any, Optional, overload

import numpy as np


class AssetError(ValueError):
    """Invalid input found while importing or validating an asset.

    The message always names the offending object, bone, action, curve or key.
    """


def _owns_immutable(a: np.ndarray) -> bool:
    """No writable array shares ``a``'s memory (it owns it, or its owner is read-only too)."""
    base = a.base
    return base is None or (isinstance(base, np.ndarray) and not base.flags.writeable and base.base is None)


def hand_over(a):
    """Make an array that only the caller holds read-only, so that an asset made from it takes it
    as it is (``readonly_array``) instead of copying it: an importer hands its fresh arrays to the
    asset and keeps no writable reference.  The array owns its memory, or views all of a fresh
    array that owns it (a bulk read reshaped to rows, or its int32 rows viewed as uint32): both
    become read-only.  Anything else is returned unchanged (and is copied by the asset as before)."""
    if not (isinstance(a, np.ndarray) and a.flags.c_contiguous):
        return a
    base = a.base
    if base is None:
        a.flags.writeable = False
    elif (isinstance(base, np.ndarray) and base.base is None and base.flags.c_contiguous
          and base.nbytes == a.nbytes):
        base.flags.writeable = False
        a.flags.writeable = False
    return a


@overload
def readonly_array(a: None, dtype=None, shape_tail: Optional[tuple] = None, name: str = "array") -> None: ...
@overload
def readonly_array(a: Any, dtype=None, shape_tail: Optional[tuple] = None, name: str = "array") -> np.ndarray: ...


def readonly_array(a, dtype=None, shape_tail: Optional[tuple] = None, name: str = "array") -> Optional[np.ndarray]:
    """Return a read-only contiguous copy of ``a`` (None stays None).  An array that is already
    read-only, contiguous and of the right dtype and shape is returned as it is: immutable data
    is shared, not copied (assets that differ only in their skin share their geometry)."""
    if a is None:
        return None
    if (isinstance(a, np.ndarray) and not a.flags.writeable and a.flags.c_contiguous
            and (dtype is None or a.dtype == np.dtype(dtype))
            and (shape_tail is None or (a.ndim == 1 + len(shape_tail) and tuple(a.shape[1:]) == tuple(shape_tail)))
            and _owns_immutable(a)):
        return a
    arr = np.array(a, dtype=dtype, copy=True)
    if shape_tail is not None:
        if arr.ndim != 1 + len(shape_tail) or tuple(arr.shape[1:]) != tuple(shape_tail):
            if arr.size == 0:
                arr = arr.reshape((0,) + tuple(shape_tail))
            else:
                raise AssetError(f"{name}: expected shape (N, {', '.join(map(str, shape_tail))}), got {arr.shape}")
    arr = np.ascontiguousarray(arr)
    arr.flags.writeable = False
    return arr
