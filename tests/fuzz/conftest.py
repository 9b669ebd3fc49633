"""The example project's package is importable here, as a user's own is under pytest's
``pythonpath`` setting (``test_fuzz_your_tools_example.py`` is the README's example)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "weather_agent" / "src"))
