"""Exits 0 when two files hold the same bytes, else names the stale one.

usage: same-bytes.py MADE COMMITTED
"""
import filecmp
import sys

if len(sys.argv) != 3:
    sys.exit(__doc__)
if not filecmp.cmp(sys.argv[1], sys.argv[2], shallow=False):
    sys.exit("stale: %s differs from what the compiler makes now (%s); "
             "regenerate it with the commands of the test" %
             (sys.argv[2], sys.argv[1]))
print("same bytes:", sys.argv[2])
