"""NPU link check (see test_link.py); a package so its conftest does not shadow tests/conftest.py."""
