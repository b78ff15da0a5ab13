"""`pip install .` as a Python user does it, offline: into a fresh venv made with
--system-site-packages (Debian's numpy, setuptools and pybind11 beside it), with
--no-build-isolation --no-index; the installed package, not the build tree, imports and certifies.
`python3 -m build --wheel --no-isolation` makes a wheel holding the extension and every module."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = {"__init__.py", "__main__.py", "_backward.py", "_conformance.py", "_html.py", "_inputs.py", "_report.py", "_varlen.py",
           "strategies.py", "pytest_plugin.py"}

CERTIFY = """
import attncheck, numpy as np
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, 2, 5, 8)).astype(np.float32) for _ in range(3))
s = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(8))
w = np.exp(s - s.max(-1, keepdims=True))
w /= w.sum(-1, keepdims=True)
report = attncheck.check_attention((w @ v).astype(np.float32), q, k, v)
wrong = attncheck.check_attention((w @ v).astype(np.float32) * np.float32(1.001), q, k, v)
print(attncheck.__file__)
print(report.passed, wrong.passed)
"""


def clean_environment():
    """Without the build tree on PYTHONPATH (ctest sets it), so the installed package is what imports."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    env["PIP_NO_INDEX"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(command, cwd, env):
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{command} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_pip_install_into_a_venv_imports_and_certifies(tmp_path):
    env = clean_environment()
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], tmp_path, env)
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--no-build-isolation", "--no-index", str(ROOT)], tmp_path, env)
    lines = run([str(python), "-c", CERTIFY], tmp_path, env).split("\n")
    assert Path(lines[0]).resolve().is_relative_to(venv.resolve()), lines[0]  # the venv's copy, not the tree's
    assert lines[1] == "True False"  # a correct kernel passes, one 0.1% off fails
    listed = run([str(python), "-m", "pip", "show", "-f", "attncheck"], tmp_path, env)
    assert "Version: " in listed and "_attncheck" in listed
    # The pytest plugin arrives through its pytest11 entry point, with no -p.
    assert "--attncheck-tier" in run([str(python), "-m", "pytest", "--help"], tmp_path, env)


def test_build_makes_a_wheel_with_the_extension_and_every_module(tmp_path):
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)], ROOT,
        clean_environment())
    wheels = list(tmp_path.glob("attncheck-*.whl"))
    assert len(wheels) == 1, wheels
    names = set(zipfile.ZipFile(wheels[0]).namelist())
    assert {f"attncheck/{m}" for m in MODULES} <= names, sorted(names)
    assert any(n.startswith("attncheck/_attncheck") and n.endswith(".so") for n in names), sorted(names)
    # Every module of the source package is shipped (a new one belongs in MODULES and python/CMakeLists.txt).
    assert {p.name for p in (ROOT / "python" / "attncheck").glob("*.py")} == MODULES
