"""``python -m steadyrun``: the ``steadyrun`` command."""

import sys

from steadyrun._cli import main

sys.exit(main())
