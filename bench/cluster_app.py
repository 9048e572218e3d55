"""The bench app for `mcp-stateless serve` (cluster section): the same tools as targets.build_ours()."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import targets

app = targets.build_ours()[1]
