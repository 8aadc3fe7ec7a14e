"""What the tests share, one module per concern; a test imports it as ``from support.scripts import run_hook``.

tests/conftest.py puts tests/ on sys.path, so these import the same from every subject folder (and
from tests/e2e and bench/, which add tests/ to sys.path themselves).
"""
