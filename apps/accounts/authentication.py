from rest_framework import authentication, exceptions

from apps.accounts.services import api_token_authenticate, token_digest


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <token>` with a personal API token."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: expected 'Bearer <token>'.")
        try:
            raw = header[1].decode()
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Invalid token.") from exc
        user = api_token_authenticate(raw=raw)
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return user, token_digest(raw)[:24]  # request.auth: which token (rate limits count per token)

    def authenticate_header(self, request) -> str:
        return f'{self.keyword} realm="api"'
