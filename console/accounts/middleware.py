"""Login for every page, except views marked `login_not_required` and the API."""

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired


class LoginRequiredMiddleware(DjangoLoginRequired):
    """Django's LoginRequiredMiddleware, leaving paths under `exempt_path_prefixes` alone.

    Every console page needs a logged-in user: anonymous visitors are redirected to
    ``settings.LOGIN_URL`` with ``next`` set to the page they asked for. Views decorated with
    ``django.contrib.auth.decorators.login_not_required`` (the health check, login, logout,
    password reset) stay public.

    Paths starting with ``/api/`` are not redirected: the API authenticates its own requests
    (tokens) and answers 401/403 itself instead of redirecting to an HTML login form. Views
    there must therefore check authentication themselves.
    """

    exempt_path_prefixes: tuple[str, ...] = ("/api/",)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith(self.exempt_path_prefixes):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
