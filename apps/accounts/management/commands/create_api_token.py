from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.services import api_token_create
from apps.common.exceptions import ApplicationError


class Command(BaseCommand):
    help = "Create a personal API token for USERNAME and print it (it is shown only this once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="command line", help="A label for the token.")

    def handle(self, *args, username: str, name: str, **options):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"No user named {username!r}.") from exc
        try:
            _, raw = api_token_create(user=user, name=name)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(raw)
