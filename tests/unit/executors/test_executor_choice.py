"""Choosing an executor: by name, with only its own options; the local one imports no Ray."""
import subprocess
import sys

import pytest
from stackbook.executors import LocalExecutor, executor_for


def test_local_is_the_default_and_takes_no_ray_address():
    assert isinstance(executor_for("local"), LocalExecutor)
    with pytest.raises(ValueError, match="--ray-address does not apply to --executor local"):
        executor_for("local", ray_address="10.0.0.1:6379")
    with pytest.raises(ValueError, match="unknown executor"):
        executor_for("slurm")


def test_ray_executor_keeps_its_address():
    assert executor_for("ray", ray_address="10.0.0.1:6379").address == "10.0.0.1:6379"


def test_local_run_path_imports_no_ray():
    code = ("import sys, stackbook.cli, stackbook.runner; from stackbook.executors import executor_for; "
            "executor_for('local'); print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
