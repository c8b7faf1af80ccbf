#!/usr/bin/env python
import os
import sys

# Management commands that never use the database: everything else starts the embedded PostgreSQL first (unless
# DATABASE_URL names a server). `serve` starts and keeps up its services itself.
WITHOUT_DATABASE = {
    "help", "version", "serve", "collectstatic", "findstatic", "makemigrations", "spectacular",
    "startapp", "startproject", "makemessages", "compilemessages", "diffsettings", "test",
}  # fmt: skip


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    from django.core.management import execute_from_command_line

    command = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "help"
    if command not in WITHOUT_DATABASE:
        from apps.common import embedded

        try:
            embedded.postgres_start()
        except embedded.EmbeddedServiceError as exc:
            sys.exit(str(exc))
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
