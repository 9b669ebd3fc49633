# pytester runs real inner pytest sessions (tests/plugin). pytest accepts `pytest_plugins`
# only in a top-level conftest, so it is enabled here rather than in tests/plugin/.
pytest_plugins = ["pytester"]
