"""What the python_*_test.py scripts share: numpy (or a skip, exit 77), the
hexir package of this checkout (the library from $HEXIR_LIBRARY, which the
caller sets), and check() with the tally whose last line install_test.cc
counts ("NAME: N passed, M failed")."""
import os
import sys

try:
    import numpy as np  # noqa: F401 (for the scripts)
except ImportError:
    print("HEXIR_SKIP: python3 has no numpy (apt-get install -y python3-numpy)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import hexir  # noqa: E402,F401

_tally = {"passed": 0, "failed": 0}


def check(ok, what):
    _tally["passed" if ok else "failed"] += 1
    print(("ok: " if ok else "FAILED: ") + what)


def error_of(f):
    """The hexir.Error f raises, or None."""
    try:
        f()
    except hexir.Error as e:
        return e
    return None


def finish(name):
    print("%s: %d passed, %d failed" % (name, _tally["passed"], _tally["failed"]))
    sys.exit(1 if _tally["failed"] else 0)
