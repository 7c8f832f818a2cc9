import sys

from pytest_gpuenv.cli import _entry

sys.exit(_entry())
