"""The documentation's local link checker (docs/check_links.py) finds what it must,
on a tiny site written here; the real site is checked by the README's test command
after it is built."""

import pytest

from .conftest import load_script


@pytest.fixture(scope="module")
def check_links():
    return load_script("docs/check_links.py")


def _site(tmp_path, extra=""):
    (tmp_path / "sub").mkdir()
    (tmp_path / "img.png").write_bytes(b"\x89PNG")
    (tmp_path / "index.html").write_text(
        '<html><body><h1 id="top">t</h1><a href="sub/page.html#sec">a</a> <img src="img.png">'
        '<a href="https://example.org/missing">external</a> <a href="#top">self</a>'
        f'<a href="mailto:x@example.org">m</a>{extra}</body></html>')
    (tmp_path / "sub" / "page.html").write_text('<html><body><section id="sec"><a href="../index.html">up</a>'
                                               '</section></body></html>')
    return tmp_path


def test_a_sound_site_passes(check_links, tmp_path):
    site = _site(tmp_path)
    assert check_links.broken_links(site) == []
    assert check_links.main([str(site)]) == 0


@pytest.mark.parametrize("bad, reason", [
    ('<a href="sub/nope.html">x</a>', "no such file"),          # negative controls: each must be caught
    ('<img src="_images/gone.png">', "no such file"),
    ('<a href="sub/page.html#nosuch">x</a>', "no anchor"),
    ('<a href="#nowhere">x</a>', "no anchor"),
    ('<a href="../../etc/passwd">x</a>', "outside the site"),
])
def test_a_broken_local_link_fails(check_links, tmp_path, bad, reason):
    site = _site(tmp_path, bad)
    problems = check_links.broken_links(site)
    assert len(problems) == 1 and reason in problems[0]
    assert check_links.main([str(site)]) == 1


def test_no_site(check_links, tmp_path):
    assert check_links.main([str(tmp_path)]) == 2
