from django.conf import settings


def site(request):
    return {"signup_open": settings.LOREKEEPER_SIGNUP_OPEN}
