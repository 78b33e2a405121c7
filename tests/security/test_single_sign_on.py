"""Single sign-on against a real OpenID Connect provider (issue 32, item 9).

The provider is a second Django process (tests/sso_provider/serve.py: django-oauth-toolkit,
RS256 ID tokens signed with a key made here, PKCE required), started and stopped by its PID.
The console is pytest-django's live server; a `requests` session is the browser. The whole
authorization-code flow goes over HTTP: the console's start URL, the provider's login form,
its redirect back with a code, and the console exchanging the code (with the PKCE verifier)
and reading the userinfo endpoint on its own.
"""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urljoin, urlparse

import pytest
import requests

from console.accounts.models import SsoIdentity
from console.accounts.roles import role_of
from console.audit.models import AuditEntry
from tests.sso_provider.harness import PASSWORD, configure_console, running_provider


@pytest.fixture(scope="module")
def provider(live_server, tmp_path_factory):
    """The provider process, its discovery document and its client's credentials."""
    with running_provider(tmp_path_factory.mktemp("idp"), live_server.url) as running:
        yield running


@pytest.fixture
def sso_on(provider, settings):
    """The console configured for the provider."""
    configure_console(settings, provider)
    return provider


def sign_on(console: str, username: str, next_url: str = "/topics/") -> requests.Response:
    """Drive the browser's side of the flow; the console's last answer (not followed)."""
    browser = requests.Session()
    login_page = browser.get(f"{console}/accounts/login/?next={next_url}", timeout=10)
    link = re.search(r'href="(/accounts/sso/start/[^"]*)"', login_page.text)
    assert link is not None, login_page.text
    start = browser.get(console + link.group(1).replace("&amp;", "&"), allow_redirects=False)
    assert start.status_code == 302
    query = parse_qs(urlparse(start.headers["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
    # The provider asks for its own login first, then answers the authorization request.
    form = browser.get(start.headers["Location"], timeout=10)
    assert "/login/" in form.url
    signed_in = browser.post(
        form.url,
        data={
            "username": username,
            "password": PASSWORD,
            "next": parse_qs(urlparse(form.url).query)["next"][0],
            "csrfmiddlewaretoken": browser.cookies["idp_csrftoken"],
        },
        allow_redirects=False,
        timeout=10,
    )
    assert signed_in.status_code == 302, signed_in.text
    authorized = browser.get(
        urljoin(form.url, signed_in.headers["Location"]), allow_redirects=False, timeout=10
    )
    callback = authorized.headers["Location"]
    assert callback.startswith(f"{console}/accounts/sso/callback/?"), callback
    answer = browser.get(callback, allow_redirects=False, timeout=30)
    answer.browser = browser  # type: ignore[attr-defined]
    return answer


@pytest.mark.django_db(transaction=True)
def test_the_full_flow_signs_in_with_the_role_of_the_mapped_group(live_server, sso_on, store):
    began = time.perf_counter()

    answer = sign_on(live_server.url, "alice")

    took = time.perf_counter() - began
    assert answer.status_code == 302, answer.text
    assert answer.headers["Location"] == "/topics/"
    page = answer.browser.get(f"{live_server.url}/topics/", timeout=10)
    assert page.status_code == 200
    assert "alice" in page.text
    identity = SsoIdentity.objects.select_related("user").get(subject__isnull=False)
    assert identity.issuer == sso_on["discovery"]["issuer"]
    assert identity.user.username == "alice"
    assert role_of(identity.user) == "admin"
    assert not identity.user.has_usable_password()
    login = AuditEntry.objects.get(action="login")
    assert login.detail.endswith("through Example IdP")
    print(f"\nsingle sign-on, full authorization-code flow: {took:.2f} s")


@pytest.mark.django_db(transaction=True)
def test_a_user_in_no_mapped_group_gets_no_session_and_a_page_saying_why(live_server, sso_on):
    answer = sign_on(live_server.url, "mallory")

    assert answer.status_code == 403
    assert "No access to this console" in answer.text
    assert "none of the user&#x27;s groups is mapped to a console role" in answer.text
    assert "contractors" in answer.text
    assert answer.browser.get(f"{live_server.url}/", allow_redirects=False).status_code == 302
    assert not SsoIdentity.objects.exists()
    assert AuditEntry.objects.filter(action="login.sso_refused").exists()


@pytest.mark.django_db(transaction=True)
def test_a_provider_name_that_a_local_account_has_is_refused(live_server, sso_on, viewer):
    answer = sign_on(live_server.url, "vera")

    assert answer.status_code == 403
    assert "already has a user named vera" in answer.text
    assert role_of(type(viewer).objects.get(pk=viewer.pk)) == "viewer"


@pytest.mark.django_db(transaction=True)
def test_the_login_page_has_no_provider_link_while_sign_on_is_off(live_server, provider):
    page = requests.get(f"{live_server.url}/accounts/login/", timeout=10)

    assert "sso/start" not in page.text
    assert requests.get(f"{live_server.url}/accounts/sso/start/", timeout=10).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_an_id_token_from_another_issuer_is_refused(live_server, sso_on, settings):
    settings.TIDEMARK_SSO_ISSUER = "https://somebody-else.example/o"

    answer = sign_on(live_server.url, "alice")

    assert answer.status_code == 403
    assert "is not TIDEMARK_SSO_ISSUER" in answer.text
    assert not SsoIdentity.objects.exists()
    assert answer.browser.get(f"{live_server.url}/", allow_redirects=False).status_code == 302
