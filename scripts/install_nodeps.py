"""Install the `test-nodeps` extra of pyproject.toml with `pip install --no-deps`.

Those libraries' own metadata pins versions the `test` extra excludes
(pytorch-forecasting: pandas<3.1; tsai: scikit-learn<1.8), so pip's resolver
would refuse them beside it; they run with the test extra's versions.  Run after
`pip install -e ".[test]"` (README, scripts/test.sh, .ci/run)."""
import subprocess
import sys
import tomllib
from pathlib import Path

pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
pins = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["test-nodeps"]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *pins]))
