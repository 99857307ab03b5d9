"""``torch._subclasses``: see ``fake_tensor``."""
