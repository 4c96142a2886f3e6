"""Run the unittest suite and print TAP lines without numbers ("ok - NAME",
"not ok - NAME", "# ..."): test/suites/client_python.sh numbers them.

    python3 -m tests.tap [PATTERN...]      (from clients/python)
"""
import sys
import time
import traceback
import unittest

from . import common


class TapResult(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.t0 = 0.0

    @staticmethod
    def name(test):
        return test.id().replace("tests.", "", 1)

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.monotonic()

    def _line(self, ok, test, extra=""):
        took = time.monotonic() - self.t0
        print(f"{'ok' if ok else 'not ok'} - python: {self.name(test)} ({took:.1f}s){extra}", flush=True)

    def _notes(self):
        for n in common.NOTES:
            print(f"# {n}", flush=True)
        common.NOTES.clear()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line(True, test)
        self._notes()

    def _bad(self, test, err):
        self._line(False, test)
        for line in "".join(traceback.format_exception(*err)).splitlines()[-30:]:
            print(f"#   {line}", flush=True)
        self._notes()

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._bad(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        if test.__class__.__name__ == "_ErrorHolder":   # setUpModule / setUpClass
            print(f"not ok - python: {test.description}", flush=True)
            for line in "".join(traceback.format_exception(*err)).splitlines()[-30:]:
                print(f"#   {line}", flush=True)
            return
        self._bad(test, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(True, test, f" # SKIP {reason}")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._line(True, test, " # TODO expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._line(False, test, " (unexpected success)")


def main(argv):
    loader = unittest.defaultTestLoader
    if argv:
        suite = unittest.TestSuite(loader.loadTestsFromName(n) for n in argv)
    else:
        suite = loader.discover("tests", top_level_dir=".")
    result = TapResult()
    suite.run(result)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
