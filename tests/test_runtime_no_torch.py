"""amplint.runtime without torch: importable, and every helper fails with the install hint.

These run in subprocesses where ``import torch`` is made to fail, so they also pass (and
matter most) in an environment where torch is not installed at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Two ways torch can be missing: an entry of None in sys.modules (what Python does for a
# module it was told not to import), and a meta-path finder that refuses it, which is what
# an environment without the package looks like (ModuleNotFoundError from the finder).
BLOCKERS = {
    "sys.modules": "import sys\nsys.modules['torch'] = None\n",
    "finder": textwrap.dedent(
        """
        import sys

        class _NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, _NoTorch())
        for _name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
            del sys.modules[_name]
        """
    ),
}

CALLS = {
    "device_type": "runtime.device_type('cuda:1')",
    "default_device": "runtime.default_device()",
    "amp_dtype": "runtime.amp_dtype('cpu')",
    "autocast": "runtime.autocast('cpu')",
    "grad_scaler": "runtime.grad_scaler('cpu')",
    "clip_grad_norm_": "runtime.clip_grad_norm_([], 1.0)",
    "seed_all": "runtime.seed_all(0)",
    "dist_backend": "runtime.dist_backend('cuda')",
    "capabilities": "runtime.capabilities('cpu')",
    "MixedPrecision": "runtime.MixedPrecision('cpu')",
    "StabilityMonitor": "runtime.StabilityMonitor()",
    "precision_report": "runtime.precision_report(None, None)",
    "amp_check": "runtime.amp_check(None, None)",
    "enable_tf32": "runtime.enable_tf32()",
    "keep_float32": "runtime.keep_float32(None, [])",
    "fallback_dtype": "runtime.fallback_dtype('cpu', 'auto')",
    "doctor_report": "doctor.doctor_report()",
}

PROBE = textwrap.dedent(
    """
    import json, sys
    import amplint.runtime as runtime
    from amplint.runtime import doctor

    results = {"torch_loaded": sys.modules.get("torch") is not None}
    for label, expression in CALLS.items():
        try:
            eval(expression)
        except runtime.TorchNotInstalledError as error:
            results[label] = ["TorchNotInstalledError", isinstance(error, ImportError), str(error)]
        except BaseException as error:
            results[label] = [type(error).__name__, isinstance(error, ImportError), str(error)]
        else:
            results[label] = ["no error", False, ""]
    print(json.dumps(results))
    """
)


def _run(prelude: str, body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", prelude + body],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("blocker", sorted(BLOCKERS))
def test_every_helper_raises_torch_not_installed(blocker: str) -> None:
    proc = _run(BLOCKERS[blocker], f"CALLS = {CALLS!r}\n" + PROBE)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert results.pop("torch_loaded") is False
    assert set(results) == set(CALLS)
    for label, (kind, is_import_error, message) in results.items():
        assert kind == "TorchNotInstalledError", (label, kind, message)
        assert is_import_error, label
        assert "pip install 'amplint[runtime]'" in message, (label, message)
        assert message.startswith("amplint.runtime needs PyTorch"), (label, message)


@pytest.mark.parametrize("blocker", sorted(BLOCKERS))
def test_doctor_main_exits_2_with_the_hint_on_stderr(blocker: str) -> None:
    body = "from amplint.runtime.doctor import main\nraise SystemExit(main())\n"
    proc = _run(BLOCKERS[blocker], body)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert "pip install 'amplint[runtime]'" in proc.stderr


def test_importing_the_package_does_not_import_torch() -> None:
    """Even with torch installed, `import amplint.runtime` must leave it unimported (linter speed)."""
    body = textwrap.dedent(
        """
        import sys
        import amplint.runtime, amplint.runtime.doctor
        print("torch" in sys.modules, "rich" in sys.modules)
        """
    )
    proc = _run("", body)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False False"


@pytest.mark.parametrize("blocker", sorted(BLOCKERS))
def test_pure_python_parts_work_without_torch(blocker: str) -> None:
    """The fallback policy and the warning classes are plain Python: usable in config code."""
    body = textwrap.dedent(
        """
        import warnings
        from amplint.runtime import Fallback, LossScaleWarning, PrecisionWarning
        assert Fallback.coerce("auto") == Fallback(dtype="auto")
        assert issubclass(LossScaleWarning, PrecisionWarning)
        print("ok")
        """
    )
    proc = _run(BLOCKERS[blocker], body)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
