from .base import *  # noqa: F403
from .base import env

DEBUG = env.bool("DEBUG", default=True)

# Static files straight from the source folders, no collectstatic needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
