"""Shared fixtures: the Go side runs as real processes (interop-helper,
fake-upstream, blast, standin-relay), built by interop/run.sh."""

import os
import subprocess
from pathlib import Path

import pytest


def go_binary(var):
    """The binary run.sh built and exported as $var."""
    path = os.environ.get(var, "")
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"{var} is not set: run the suite with interop/run.sh")
    return Path(path)


@pytest.fixture(scope="session")
def fake_upstream_bin():
    return go_binary("INTEROP_FAKE_UPSTREAM")


@pytest.fixture(scope="session")
def blast_bin():
    return go_binary("INTEROP_BLAST")


@pytest.fixture(scope="session")
def standin_relay_bin():
    return go_binary("INTEROP_STANDIN_RELAY")


@pytest.fixture(scope="session")
def helper():
    """Returns run(*args, input=None, ok=True) -> CompletedProcess (text mode).

    With ok=True a non-zero exit fails the test with the helper's output.
    Exit codes: 0 success, 1 rejected input (stdout names the class), 2 usage/IO.
    """
    path = go_binary("INTEROP_HELPER")

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
