"""`campaign serve` over real HTTP: the journal's sections as pages, read-only, escaped,
and a token required off loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bench import scale_build
from campaign.store import Store
from tests.campaign.web.serving import ROOT, serving

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> [x](javascript:alert(1))'
TOKEN = "t0k3n-for-the-test-0123456789"
pytestmark = pytest.mark.xdist_group("web-serve")  # one database and one server for the module


def _experiment_links(html: str) -> list[str]:
    return [line.split('href="')[1].split('"')[0] for line in html.splitlines() if "/e/" in line and 'href="' in line]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """Three experiments through the Store API; the second's analysis is hostile model text."""
    db = tmp_path_factory.mktemp("web") / "campaign.db"
    cid = scale_build.build(db, 3)
    with Store(db) as store:
        exp = store.list_experiments(cid, role="candidate")[1]
        store.record_artifact(exp.id, "analysis", HOSTILE)
    return db, cid, exp.hypothesis


@pytest.fixture(scope="module")
def base(db: tuple[Path, str, str]) -> str:
    with serving(db[0]) as url:
        yield url


def test_the_pages_are_the_journal_sections(db: tuple[Path, str, str], base: str) -> None:
    path, cid, _ = db
    index = httpx.get(base + "/")
    assert index.status_code == 200 and f'href="/c/{cid}"' in index.text
    page = httpx.get(f"{base}/c/{cid}")
    assert page.status_code == 200
    assert "<h2>Scoreboard</h2>" in page.text and "<h2>Current baseline</h2>" in page.text
    assert "edit only inside notes blocks" not in page.text  # the file's footer: nothing to edit here
    links = _experiment_links(page.text)
    assert len(links) >= 3  # every experiment links to its own page
    exp = httpx.get(base + links[0])
    assert exp.status_code == 200 and "<strong>Decided:</strong>" in exp.text
    assert "notes:" not in exp.text  # the notes blocks live in the journal file only
    plot = httpx.get(base + links[0] + "/plot.png")
    assert plot.status_code == 200 and plot.content.startswith(b"\x89PNG")
    assert httpx.get(f"{base}/c/{cid}/overview.png").content.startswith(b"\x89PNG")
    assert httpx.get(f"{base}/c/no-such-campaign").status_code == 404


def test_model_text_is_shown_as_text(db: tuple[Path, str, str], base: str) -> None:
    _, cid, hyp = db
    pages = [httpx.get(base + link).text for link in _experiment_links(httpx.get(f"{base}/c/{cid}").text)]
    html = next(p for p in pages if "__pwned" in p)
    assert f"{hyp}" in html
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    assert "<script>window" not in html and "<img src=x" not in html and 'href="javascript' not in html


def test_no_write_endpoint_and_a_strict_policy(db: tuple[Path, str, str], base: str) -> None:
    _, cid, _ = db
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert httpx.request(method, f"{base}/c/{cid}").status_code == 405
    csp = httpx.get(base + "/").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp


def test_loopback_answers_only_to_its_own_name(base: str) -> None:
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 gets nothing."""
    assert httpx.get(base + "/", headers={"Host": "evil.example"}).status_code == 421
    assert httpx.get(base + "/", headers={"Host": "localhost"}).status_code == 200


def test_off_loopback_a_token_is_required(db: tuple[Path, str, str]) -> None:
    path, cid, _ = db
    with serving(path, host="0.0.0.0", token=TOKEN) as url:
        assert httpx.get(url + "/").status_code == 401
        assert httpx.get(f"{url}/api/version").status_code == 401
        assert httpx.get(f"{url}/c/{cid}?token=wrong-{TOKEN}").status_code == 401
        first = httpx.get(f"{url}/c/{cid}?token={TOKEN}")
        assert first.status_code == 303 and first.headers["location"] == f"/c/{cid}"  # the token leaves the URL
        assert "httponly" in first.headers["set-cookie"].lower()
        with httpx.Client(base_url=url) as client:
            client.get(f"/?token={TOKEN}")
            assert client.get(f"/c/{cid}").status_code == 200  # the cookie carries it on
        assert httpx.get(url + "/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def _serve_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "CAMPAIGN_SERVE_TOKEN"} | {"PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.entry", "serve", *args],
        capture_output=True,
        text=True,
        env=full | (env or {}),
        cwd=ROOT,
        timeout=60,
    )


def test_off_loopback_without_a_token_is_refused(db: tuple[Path, str, str]) -> None:
    out = _serve_cli("--db", str(db[0]), "--host", "0.0.0.0", "--port", "0")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "CAMPAIGN_SERVE_TOKEN" in out.stderr and "Traceback" not in out.stderr
    short = _serve_cli("--db", str(db[0]), "--host", "0.0.0.0", "--port", "0", env={"CAMPAIGN_SERVE_TOKEN": "abc"})
    assert short.returncode == 2 and "at least 16" in short.stderr


def test_a_missing_database_or_a_taken_port_is_one_line(db: tuple[Path, str, str], tmp_path: Path) -> None:
    missing = _serve_cli("--db", str(tmp_path / "none.db"))
    assert missing.returncode == 2 and "no campaign database" in missing.stderr and missing.stderr.count("\n") == 1
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        out = _serve_cli("--db", str(db[0]), "--port", str(taken.getsockname()[1]))
    assert out.returncode == 2 and "cannot listen there" in out.stderr and out.stderr.count("\n") == 1


def test_a_page_follows_the_record(backend_db: str) -> None:
    """A page rendered once is answered again from the server's cache only while the
    record is unchanged: a review requested since shows at the next request.  On a SQLite
    file and on PostgreSQL."""
    db = backend_db
    cid = scale_build.build(db, 1)
    with serving(db) as url:
        assert f'href="/c/{cid}"' in httpx.get(url + "/").text
        before = httpx.get(f"{url}/c/{cid}").text
        assert before == httpx.get(f"{url}/c/{cid}").text and "<h2>Reviews</h2>" not in before
        version = httpx.get(f"{url}/api/version").json()["version"]
        with Store(db) as store:
            store.request_review(cid, "two dead ends in a row: look before going on", key="k")
        assert httpx.get(f"{url}/api/version").json()["version"] != version
        after = httpx.get(f"{url}/c/{cid}").text
        assert "<h2>Reviews</h2>" in after and "two dead ends in a row" in after
