"""Shared fixtures: the Go side runs as a real process (interop-helper)."""

import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def helper():
    """Returns run(*args, input=None, ok=True) -> CompletedProcess (text mode).

    With ok=True a non-zero exit fails the test with the helper's output.
    Exit codes: 0 success, 1 rejected input (stdout names the class), 2 usage/IO.
    """
    path = os.environ.get("INTEROP_HELPER", "")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("INTEROP_HELPER is not set: run the suite with interop/run.sh")

    def run(*args, input=None, ok=True):
        proc = subprocess.run(
            [path, *map(str, args)],
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if ok and proc.returncode != 0:
            raise AssertionError(
                f"interop-helper {' '.join(map(str, args))} exited {proc.returncode}:\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    return run
