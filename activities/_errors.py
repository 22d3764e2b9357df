"""Re-exported for activities: see ``oma.errors.application_error``."""

from oma.errors import application_error

__all__ = ["application_error"]
