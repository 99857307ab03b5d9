"""Test-wide settings: the IR verifier runs between passes (DESIGN.md), and
compiled code is cached in a throwaway folder, never the user's cache."""
import os
import tempfile

os.environ["TRACEC_CHECKS"] = "1"
os.environ.setdefault("TRACEC_CACHE_DIR", tempfile.mkdtemp(prefix="tracec-test-cache-"))

# ``import torchvision`` (the test oracle, when installed) works in-process
import vision_oracle  # noqa: E402

vision_oracle.stub()
