"""Builds attncheck's extension module (attncheck._attncheck) for pip and `python -m build`.

The sources are python/attncheck_module.cpp and the numeric and tensor rooms of verify/, read from
their CMakeLists.txt add_library() lists so that this build and the CMake one compile the same
files. Needs a C++20 compiler and the GMP, MPFR and MPFI development packages (Debian: libgmp-dev,
libmpfr-dev, libmpfi-dev) and Boost's headers (libboost-dev).
"""

import re
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

# Every core unless ATTNCHECK_BUILD_JOBS says otherwise: the tensor sources take minutes serially.
ParallelCompile("ATTNCHECK_BUILD_JOBS", default=0).install()

ROOT = Path(__file__).resolve().parent


def room_sources(room: str, target: str) -> list[str]:
    """The .cpp files of add_library(<target> ...) in verify/<room>/CMakeLists.txt."""
    text = (ROOT / "verify" / room / "CMakeLists.txt").read_text()
    match = re.search(r"add_library\(\s*" + re.escape(target) + r"\s+([^)]*)\)", text)
    if match is None:
        raise RuntimeError(f"verify/{room}/CMakeLists.txt: no add_library({target} ...)")
    sources = [f"verify/{room}/{name}" for name in match.group(1).split() if name.endswith(".cpp")]
    if not sources:
        raise RuntimeError(f"verify/{room}/CMakeLists.txt: add_library({target}) lists no .cpp file")
    return sources


def version() -> str:
    match = re.search(r"project\(attncheck VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    if match is None:
        raise RuntimeError("CMakeLists.txt: no project(attncheck VERSION x.y.z)")
    return match.group(1)


extension = Pybind11Extension(
    "attncheck._attncheck",
    ["python/attncheck_module.cpp"] + room_sources("numeric", "attn_numeric") + room_sources("tensor", "attn_tensor"),
    include_dirs=["verify", "src"],
    libraries=["mpfi", "mpfr", "gmp"],
    cxx_std=20,
    extra_compile_args=["-O2", "-fopenmp-simd"],
)

setup(version=version(), ext_modules=[extension], cmdclass={"build_ext": build_ext})
