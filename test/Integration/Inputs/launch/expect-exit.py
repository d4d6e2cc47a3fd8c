# expect-exit.py CODE COMMAND...: runs COMMAND and succeeds only when it
# exits with CODE (lit's `not` accepts any failure).
import subprocess
import sys

code = subprocess.run(sys.argv[2:]).returncode
if code != int(sys.argv[1]):
    sys.exit(f"expected exit code {sys.argv[1]}, got {code}")
