"""Turning numpy arrays and PyTorch tensors into the exact float64 arrays the C++ side certifies.

Every float64, float32, float16 and bfloat16 value is exactly a float64, so nothing is rounded:
float16 arrays widen exactly, and bfloat16 tensors (which numpy cannot hold) go through
``.float()``, which is exact too. The dtype is remembered to pick the default precision.
"""

from __future__ import annotations

import numbers

import numpy as np

# dtype name -> precision profile of the C++ side (verify/tensor/tensor_band.hpp, arithmetic_profile).
PRECISION_OF_DTYPE = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
PRECISIONS = ("fp64", "fp32", "fp16", "bf16", "fp16-math", "bf16-math")
ALIGNMENTS = ("top-left", "bottom-right")


def _is_torch_tensor(x) -> bool:
    # Checked by type name, so that numpy-only users never import torch.
    return type(x).__module__.startswith("torch") and hasattr(x, "detach") and hasattr(x, "dtype")


def as_exact_array(x, name: str, *, allow_bool: bool = False):
    """(float64 array holding x's values exactly, dtype name) for a numpy array or a torch CPU tensor.

    Raises TypeError naming ``name`` for anything else (lists, ints, complex, other dtypes).
    """
    if _is_torch_tensor(x):
        tensor = x.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype == "bool" and allow_bool:
            return tensor.numpy().astype(np.float64), "bool"
        if dtype not in PRECISION_OF_DTYPE:
            raise TypeError(f"{name}: dtype torch.{dtype} is not supported (float64, float32, float16, bfloat16)"
                            f"{_integer_mask_hint(dtype, allow_bool)}")
        if dtype == "bfloat16":
            tensor = tensor.float()  # exact: every bfloat16 is a float32
        return np.asarray(tensor.numpy(), dtype=np.float64), dtype
    if isinstance(x, np.ndarray):
        dtype = x.dtype.name
        if dtype == "bool" and allow_bool:
            return x.astype(np.float64), "bool"
        if dtype not in PRECISION_OF_DTYPE:
            raise TypeError(f"{name}: dtype {dtype} is not supported (float64, float32, float16; bfloat16 as a torch "
                            f"tensor){_integer_mask_hint(dtype, allow_bool)}")
        return x.astype(np.float64), dtype
    raise TypeError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")


def as_native_array(x, name: str):
    """(x's values as a numpy array in their own dtype and strides, without a copy; dtype name) for a
    numpy array or a torch CPU tensor of a float dtype: what the C++ side reads in place. A bfloat16
    tensor comes as its bits, an int16 view (numpy has no bfloat16). TypeError as as_exact_array's.
    """
    if _is_torch_tensor(x):
        tensor = x.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in PRECISION_OF_DTYPE:
            as_exact_array(x, name)  # its TypeError
        if dtype == "bfloat16":
            import torch  # a bfloat16 tensor: torch is there

            return tensor.view(torch.int16).numpy(), dtype
        return tensor.numpy(), dtype
    if isinstance(x, np.ndarray) and x.dtype.name in PRECISION_OF_DTYPE:
        if not x.dtype.isnative:  # the C++ side reads the host's byte order: a big-endian array is converted
            return x.astype(x.dtype.newbyteorder("=")), x.dtype.name
        return x, x.dtype.name
    return as_exact_array(x, name)  # its TypeError


def finite_check_values(values: np.ndarray, dtype: str) -> np.ndarray:
    """An array require_finite can read for as_native_array's (bfloat16 bits widened to float32)."""
    if dtype != "bfloat16":
        return values
    return (values.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def _integer_mask_hint(dtype: str, mask: bool) -> str:
    """For a mask of integers: which of the two meanings to pass."""
    if not mask or not (dtype.startswith("int") or dtype.startswith("uint")):
        return ""
    return ("; an integer mask is ambiguous: pass mask.astype(bool) (True = the key takes part) or a float "
            "additive mask (0 and -inf)")


def require_finite(values: np.ndarray, name: str, *, allow_minus_inf: bool = False) -> None:
    """ValueError naming the first element that is NaN or infinite (-inf allowed in an additive mask),
    with its index in the tensor's own shape."""
    bad = np.isnan(values) | (values == np.inf) | (~np.isfinite(values) if not allow_minus_inf else False)
    if not bad.any():
        return
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad.reshape(-1))), values.shape))
    what = "NaN" if np.isnan(values[index]) else "+inf" if values[index] > 0 else "-inf"
    raise ValueError(f"{name}: element {index} of shape {list(values.shape)} is {what} (inputs must be finite"
                     f"{'; -inf only' if allow_minus_inf else ''})")


def to_rank4(shape: tuple, name: str) -> tuple:
    """[L, E] -> [1, 1, L, E]; [B, L, E] -> [B, 1, L, E]; rank 4 unchanged; ValueError otherwise."""
    if len(shape) == 4:
        return shape
    if len(shape) == 3:
        return (shape[0], 1, shape[1], shape[2])
    if len(shape) == 2:
        return (1, 1, shape[0], shape[1])
    raise ValueError(f"{name}: rank must be 2, 3 or 4 ([L, E], [B, L, E] or [B, H, L, E]), got shape {list(shape)}")


def mask_to_rank4(mask_shape: tuple, query_rank: int) -> tuple:
    """The mask's shape once the query's leading axes are made rank 4 the same way.

    PyTorch broadcasts attn_mask right-aligned against the weights [..., L, S]; the mask is padded
    with leading ones to the query's rank, then gets the axes the query got.
    """
    if len(mask_shape) > query_rank:
        raise ValueError(f"attn_mask: rank {len(mask_shape)} exceeds the query's rank {query_rank}")
    padded = (1,) * (query_rank - len(mask_shape)) + tuple(mask_shape)
    return to_rank4(padded, "attn_mask")


def check_shapes(out, query, key, value, enable_gqa: bool, out_name: str = "out", allow_empty: bool = False) -> None:
    """ValueError naming the argument when the shapes do not make one SDPA call (``out_name``: the
    output-shaped argument, out or dout). allow_empty: the batch and sequence axes may be 0 (heads
    and the last axis never)."""
    q, k, v, o = query.shape, key.shape, value.shape, out.shape
    if not (len(q) == len(k) == len(v)):
        raise ValueError(f"key/value: rank must match the query's ({len(q)}), got key {list(k)} and value {list(v)}")
    if k[-1] != q[-1]:
        raise ValueError(f"key: last dimension (E) is {k[-1]}, the query's is {q[-1]}")
    if k[:-1] != v[:-1]:
        raise ValueError(f"value: shape {list(v)} must match key {list(k)} except in the last dimension")
    if len(q) >= 3 and k[0] != q[0]:
        raise ValueError(f"key: batch size {k[0]} differs from the query's {q[0]}")
    if len(q) == 4 and k[1] != q[1]:
        if not enable_gqa:
            raise ValueError(f"key: {k[1]} heads differ from the query's {q[1]} (pass enable_gqa=True for GQA)")
        if k[1] == 0 or q[1] % k[1] != 0:
            raise ValueError(f"key: its {k[1]} heads do not divide the query's {q[1]} heads")
    expected = tuple(q[:-1]) + (v[-1],)
    if tuple(o) != expected:
        raise ValueError(f"{out_name}: shape {list(o)} should be {list(expected)} (query's shape with value's last "
                         f"dimension)")
    for name, shape in (("query", q), ("key", k), ("value", v)):
        must = (shape[-1], shape[1]) if allow_empty and len(shape) == 4 else (shape[-1],) if allow_empty else shape
        if 0 in must:
            what = "its heads and last dimension" if allow_empty else "every dimension"
            raise ValueError(f"{name}: {what} must be positive, got {list(shape)}")


def check_int(x, name: str, *, minimum: int = 0, allow_none: bool = False):
    if x is None and allow_none:
        return None
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(x).__name__}")
    if x < minimum:
        raise ValueError(f"{name}: must be at least {minimum}, got {x}")
    return int(x)


def device_note(**tensors) -> list:
    """[a note naming the arguments that are torch tensors off the CPU, copied to the host to be
    certified], or [] when every one is on the CPU (or not a tensor)."""
    away = [f"{name} ({x.device})" for name, x in tensors.items()
            if _is_torch_tensor(x) and getattr(x.device, "type", "cpu") != "cpu"]
    if not away:
        return []
    return [f"{', '.join(away)} copied to the host: certified there, on the values the device holds (the "
            f"kernel's arithmetic is declared by precision, not measured on the device)"]
