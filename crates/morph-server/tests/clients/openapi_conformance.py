"""Schemathesis (from PyPI, as .ci/run installs it) against a live server's own /openapi.json:
each route in turn is sent what the document allows and what it does not, with a fixed seed (the
same requests every run), and every answer is held to CHECKS.

Run by tests/server/openapi_conformance.rs and morph-cli's tests/cli/several_models.rs:
openapi_conformance.py URL CHECKS EXAMPLES_PER_ROUTE [SKIPPED_PATHS_REGEX]
Exits non-zero with schemathesis's report when a check fails or no route was tested.
"""

import subprocess
import sys
import tempfile

URL, CHECKS, EXAMPLES = sys.argv[1:4]
SKIPPED = sys.argv[4] if len(sys.argv) > 4 else None
SEED = "1"

command = [
    sys.executable, "-m", "schemathesis.cli", "run", f"{URL}/openapi.json",
    "--checks", CHECKS,
    "--phases", "examples,coverage,fuzzing",
    "--max-examples", EXAMPLES,
    "--seed", SEED,
    "--generation-database", "none",
    "--workers", "1",
    "--no-color",
]
if SKIPPED:
    command += ["--exclude-path-regex", SKIPPED]

# Schemathesis keeps a cache of what it found in the folder it runs in: a scratch one.
with tempfile.TemporaryDirectory() as scratch:
    run = subprocess.run(command, cwd=scratch, capture_output=True, text=True)
report = run.stdout + run.stderr
assert run.returncode == 0, f"schemathesis found the server and its document apart:\n{report}"
# It ran: some route was tested (a run that reached none would also exit 0).
assert "Tested:" in report and "Tested: 0" not in report, report
print(report.strip().splitlines()[-1])
print("all client checks passed")
