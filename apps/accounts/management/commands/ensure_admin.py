import os

from django.core.management.base import BaseCommand

from apps.accounts.services import admin_ensure


class Command(BaseCommand):
    help = (
        "Create the first admin account if there is no superuser yet. Its password is LOREKEEPER_ADMIN_PASSWORD "
        "when set, otherwise a generated one that is printed once."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("LOREKEEPER_ADMIN_USERNAME", "admin"))

    def handle(self, *args, username: str, **options):
        user, generated = admin_ensure(username=username, password=os.environ.get("LOREKEEPER_ADMIN_PASSWORD"))
        if user is None:
            return
        if generated:
            self.stdout.write(
                self.style.SUCCESS(f"Created admin account: username {username!r}, password {generated!r}")
            )
            self.stdout.write("It is shown only this once; change it under Account → Password.")
        else:
            self.stdout.write(
                self.style.SUCCESS(f"Created admin account {username!r} (password from the environment).")
            )
