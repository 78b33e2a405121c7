"""A real OpenID Connect provider for the single sign-on tests: a second Django process
running django-oauth-toolkit, started and stopped (by PID) by tests/security/
test_single_sign_on.py.

``python serve.py CONFIG.json``: CONFIG names the database file, the RSA private key (PEM)
that signs ID tokens, the one client (id, secret, redirect URI) and the users (name,
password, email, groups). The provider migrates its database, makes them, listens on a free
loopback port and prints ``listening <port>`` once it answers.
"""

import json
import os
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["IDP_CONFIG"] = sys.argv[1]
os.environ["DJANGO_SETTINGS_MODULE"] = "idp_settings"

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from oauth2_provider.models import Application  # noqa: E402


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002
        pass


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    call_command("migrate", verbosity=0, interactive=False)
    for spec in config["users"]:
        user = User.objects.create_user(spec["username"], spec["email"], spec["password"])
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in spec["groups"]])
    Application.objects.create(
        name="tidemark",
        client_id=config["client_id"],
        client_secret=config["client_secret"],
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=config["redirect_uri"],
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )
    server = make_server("127.0.0.1", 0, get_wsgi_application(), ThreadingServer, QuietHandler)
    print(f"listening {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
