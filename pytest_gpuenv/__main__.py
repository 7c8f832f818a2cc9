import sys

from pytest_gpuenv.cli import main

sys.exit(main())
